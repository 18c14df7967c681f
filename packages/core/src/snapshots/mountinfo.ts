// The mounts of this process's mount namespace, from /proc/self/mountinfo (proc(5)).

/** One line of /proc/self/mountinfo, with the octal escapes (`\040` for a space) undone. */
export interface MountInfo {
  /** The directory of its filesystem that the mount shows (a bind mount's source, from that filesystem's root). */
  readonly root: string;
  /** Where it is mounted. */
  readonly mountPoint: string;
  /** The filesystem type, e.g. `overlay`, `ext4`. */
  readonly fsType: string;
  /** What was mounted, as the filesystem names it (`overlay`, `/dev/vda1`). */
  readonly source: string;
  /** The filesystem's own options, e.g. overlay's `lowerdir=...`. */
  readonly superOptions: string;
}

/**
 * The mounts of this mount namespace; [] where /proc is not mounted.
 * @example
 * const mounted = (await mountInfo()).some((m) => m.mountPoint === '/mnt/app');
 */
export async function mountInfo(): Promise<MountInfo[]> {
  const { readFile } = await import('node:fs/promises');
  let text: string;
  try {
    text = await readFile('/proc/self/mountinfo', 'utf8');
  } catch {
    return [];
  }
  const out: MountInfo[] = [];
  for (const line of text.split('\n')) {
    // id parent major:minor root mountpoint options [optional fields...] - fstype source superoptions
    const fields = line.split(' ');
    const dash = fields.indexOf('-', 6);
    if (fields.length < 10 || dash === -1) continue;
    out.push({
      root: unescape(fields[3]!),
      mountPoint: unescape(fields[4]!),
      fsType: unescape(fields[dash + 1] ?? ''),
      source: unescape(fields[dash + 2] ?? ''),
      superOptions: unescape(fields[dash + 3] ?? ''),
    });
  }
  return out;
}

function unescape(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}
