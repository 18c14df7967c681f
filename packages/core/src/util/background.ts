// A process that pulls in the background: every thread it has, and every thread started later, at
// the lowest CPU priority (nice 19) and in the idle I/O class, so the kernel serves everything else
// on the node first. Within one process, pulls order themselves (pull/priority.ts); between a
// background `fastpull pull` and the node's other work, only the kernel can.
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { setPriority } from 'node:os';
import { FastpullError } from '../errors.js';
import { nativeFs } from '../native/addon.js';

/** The lowest CPU priority: nice 19. */
export const BACKGROUND_NICE = 19;
/** ioprio_set(2)'s idle class: the disk serves the thread only when no other asks. */
const IOPRIO_CLASS_IDLE = 3;

/** What {@link enterBackground} did. */
export interface BackgroundState {
  /** The nice value every thread now has. */
  readonly nice: number;
  /** Whether the threads are in the idle I/O class (false where the native addon is missing). */
  readonly ioIdle: boolean;
  /**
   * Whether the session's CPU group (autogroup) was lowered to nice 19 too: only where the kernel
   * groups CPU time by session and this process leads its session, so no other program's share moves.
   */
  readonly autogroup: boolean;
}

/**
 * Lowers this whole process to the background: nice 19 and the idle I/O class for every thread
 * (threads started later inherit both from the thread that starts them). It cannot be undone by
 * a process without CAP_SYS_NICE: meant for a process that does background work only (the CLI's
 * `pull --background`). INTERNAL when a thread cannot be lowered for another reason than having ended.
 * @example enterBackground() // { nice: 19, ioIdle: true, autogroup: true }
 */
export function enterBackground(): BackgroundState {
  const setIoPriority = (nativeFs() as { setIoPriority?: (tid: number, cls: number, level: number) => void }).setIoPriority;
  const ioIdle = typeof setIoPriority === 'function';
  // Listed again until a listing shows no thread not yet lowered: a thread started while the list
  // was walked may have been started by one not yet lowered.
  const done = new Set<string>();
  for (let fresh = readdirSync('/proc/self/task'); fresh.length > 0; fresh = readdirSync('/proc/self/task').filter((t) => !done.has(t))) {
    for (const tid of fresh) {
      done.add(tid);
      try {
        setPriority(Number(tid), BACKGROUND_NICE);
        if (ioIdle) setIoPriority(Number(tid), IOPRIO_CLASS_IDLE, 0);
      } catch (e) {
        if (!isGone(e)) throw new FastpullError('INTERNAL', `moving thread ${tid} to the background: ${(e as Error).message}`, { cause: e });
      }
    }
  }
  return { nice: BACKGROUND_NICE, ioIdle, autogroup: lowerOwnAutogroup() };
}

/**
 * Where the kernel splits CPU time between sessions first (autogroups), a thread's nice value only
 * orders it within its session: the session's group must be lowered too, or the pull takes a whole
 * group's share from other sessions' work. Done only by a session leader (the CLI relaunches a
 * background pull as one), since every process of the session shares the group.
 */
function lowerOwnAutogroup(): boolean {
  try {
    const stat = readFileSync('/proc/self/stat', 'utf8');
    const session = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[3]);
    if (session !== process.pid) return false;
    writeFileSync('/proc/self/autogroup', String(BACKGROUND_NICE));
    return true;
  } catch {
    // No autogroups (CONFIG_SCHED_AUTOGROUP off, or the file is absent): sessions do not split CPU time.
    return false;
  }
}

/** A thread that ended since the listing: ESRCH from the addon, or from os.setPriority (a SystemError). */
function isGone(e: unknown): boolean {
  const err = e as { code?: string; info?: { code?: string } };
  return err.code === 'ESRCH' || err.info?.code === 'ESRCH';
}
