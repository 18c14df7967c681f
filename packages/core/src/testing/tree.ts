// Reads a real directory into the shape of an expected tree, writes one out, and lists differences.
import { createHash } from 'node:crypto';
import { chmod, chown, lchown, lstat, mkdir, readdir, readFile, readlink, symlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { ExpectedEntry } from './builder.js';

/** A node that is none of file, dir or symlink (devices, fifos, sockets), e.g. a 0/0 character-device whiteout in a snapshot directory. */
export interface SpecialEntry {
  /** Always `special`. */
  readonly type: 'special';
  /** What kind of special file it is. */
  readonly kind: 'char-device' | 'block-device' | 'fifo' | 'socket';
  /** st_mode & 0o7777. */
  readonly mode: number;
  /** Owner user id. */
  readonly uid: number;
  /** Owner group id. */
  readonly gid: number;
  /** Device number (st_rdev); 0 for whiteouts. */
  readonly rdev: number;
}

/** What {@link readTree} finds at a path: an {@link ExpectedEntry} or a special node. */
export type TreeEntry = ExpectedEntry | SpecialEntry;

/**
 * Reads `dir` recursively into a map keyed by relative path (no leading slash; `dir` itself is not
 * a key). Symlinks are never followed; `mode` is st_mode & 0o7777; files carry their content.
 *
 * @example
 * expect(diffTrees(image.expectedTree(), await readTree(mergedDir))).toEqual([]);
 */
export async function readTree(dir: string): Promise<Map<string, TreeEntry>> {
  const out = new Map<string, TreeEntry>();
  const walk = async (abs: string, rel: string): Promise<void> => {
    const names = (await readdir(abs)).sort();
    for (const name of names) {
      const childAbs = join(abs, name);
      const key = rel === '' ? name : `${rel}/${name}`;
      const st = await lstat(childAbs);
      const owner = { uid: st.uid, gid: st.gid };
      const mode = st.mode & 0o7777;
      if (st.isDirectory()) {
        out.set(key, { type: 'dir', mode, ...owner });
        await walk(childAbs, key);
      } else if (st.isFile()) {
        out.set(key, { type: 'file', mode, ...owner, content: await readFile(childAbs) });
      } else if (st.isSymbolicLink()) {
        out.set(key, { type: 'symlink', target: await readlink(childAbs), ...owner });
      } else {
        const kind = st.isCharacterDevice() ? 'char-device' : st.isBlockDevice() ? 'block-device' : st.isFIFO() ? 'fifo' : 'socket';
        out.set(key, { type: 'special', kind, mode, ...owner, rdev: st.rdev });
      }
    }
  };
  await walk(dir, '');
  return out;
}

/** Options of {@link diffTrees}. */
export interface DiffTreesOptions {
  /** Compare uid and gid; default true. Turn off where the unpacker ran without the right to chown. */
  readonly owners?: boolean;
}

function describe(e: TreeEntry): string {
  switch (e.type) {
    case 'file':
      return `file, ${e.content.byteLength} bytes`;
    case 'dir':
      return 'dir';
    case 'symlink':
      return `symlink -> ${JSON.stringify(e.target)}`;
    case 'special':
      return e.kind;
  }
}

function octal(mode: number): string {
  return `0o${mode.toString(8)}`;
}

function shortHash(b: Buffer): string {
  return `sha256:${createHash('sha256').update(b).digest('hex').slice(0, 12)}`;
}

/**
 * Lists how `got` differs from `want`, one human-readable line per difference, sorted by path:
 * missing and extra paths, type, mode, owner, content (sizes and hashes, never the bytes) and
 * symlink target. Empty when the trees are equal.
 * @example
 * expect(diffTrees(await readTree(referenceDir), await readTree(unpackedDir))).toEqual([]);
 */
export function diffTrees(want: ReadonlyMap<string, TreeEntry>, got: ReadonlyMap<string, TreeEntry>, options: DiffTreesOptions = {}): string[] {
  const owners = options.owners ?? true;
  const out: string[] = [];
  const paths = [...new Set([...want.keys(), ...got.keys()])].sort();
  for (const path of paths) {
    const w = want.get(path);
    const g = got.get(path);
    if (g === undefined) {
      if (w !== undefined) out.push(`${path}: missing (want ${describe(w)})`);
      continue;
    }
    if (w === undefined) {
      out.push(`${path}: extra (got ${describe(g)})`);
      continue;
    }
    if (w.type !== g.type || (w.type === 'special' && g.type === 'special' && w.kind !== g.kind)) {
      out.push(`${path}: type: want ${describe(w)}, got ${describe(g)}`);
      continue;
    }
    if (w.type !== 'symlink' && g.type !== 'symlink' && w.mode !== g.mode) out.push(`${path}: mode: want ${octal(w.mode)}, got ${octal(g.mode)}`);
    if (owners && (w.uid !== g.uid || w.gid !== g.gid)) out.push(`${path}: owner: want ${w.uid}:${w.gid}, got ${g.uid}:${g.gid}`);
    if (w.type === 'file' && g.type === 'file' && !w.content.equals(g.content)) {
      out.push(`${path}: content: want ${w.content.byteLength} bytes ${shortHash(w.content)}, got ${g.content.byteLength} bytes ${shortHash(g.content)}`);
    }
    if (w.type === 'symlink' && g.type === 'symlink' && w.target !== g.target)
      out.push(`${path}: symlink target: want ${JSON.stringify(w.target)}, got ${JSON.stringify(g.target)}`);
    if (w.type === 'special' && g.type === 'special' && w.rdev !== g.rdev) out.push(`${path}: rdev: want ${w.rdev}, got ${g.rdev}`);
  }
  return out;
}

/**
 * Writes a tree of files, directories and symlinks under `dir` (which may exist), e.g. to make a
 * reference directory to compare an unpack with. Owners are set only when running as root; special
 * entries are refused. Directory modes are applied last, deepest first, so a read-only directory
 * still gets its children.
 * @example
 * await writeTree('/tmp/reference', image.expectedTree());
 */
export async function writeTree(dir: string, tree: ReadonlyMap<string, TreeEntry>): Promise<void> {
  const asRoot = process.getuid?.() === 0;
  const dirs: [string, Extract<TreeEntry, { type: 'dir' }>][] = [];
  await mkdir(dir, { recursive: true });
  for (const path of [...tree.keys()].sort()) {
    const e = tree.get(path) as TreeEntry;
    if (path.startsWith('/') || path.split('/').some((p) => p === '' || p === '.' || p === '..'))
      throw new Error(`writeTree: bad path ${JSON.stringify(path)}`);
    const abs = join(dir, path);
    if (e.type !== 'dir') await mkdir(dirname(abs), { recursive: true, mode: 0o755 });
    switch (e.type) {
      case 'dir':
        await mkdir(abs, { recursive: true, mode: 0o700 });
        dirs.push([abs, e]);
        break;
      case 'file':
        await writeFile(abs, e.content, { mode: 0o600 });
        // chown clears setuid/setgid, so the mode comes after it.
        if (asRoot) await chown(abs, e.uid, e.gid);
        await chmod(abs, e.mode);
        break;
      case 'symlink':
        await symlink(e.target, abs);
        if (asRoot) await lchown(abs, e.uid, e.gid);
        break;
      case 'special':
        throw new Error(`writeTree: ${path}: cannot write a ${e.kind}`);
    }
  }
  for (const [abs, e] of dirs.reverse()) {
    if (asRoot) await chown(abs, e.uid, e.gid);
    await chmod(abs, e.mode);
  }
}
