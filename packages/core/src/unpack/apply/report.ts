// What one apply reports: its statistics and warnings, and errors that name the layer and the entry being applied.
import { FastpullError, fromFsError } from '../../errors.js';
import { display, errnoOf } from './rawpath.js';
import type { ParsedTarEntry } from '../tar/tarreader.js';
import type { LowerChecks } from '../../snapshots/lowers.js';

/** What {@link applyLayer} did. */
export interface ApplyStats {
  /** Tar entries read (PAX and GNU long-name headers are part of the entry they describe). */
  entries: number;
  /** Regular files written (hardlinks not counted). */
  files: number;
  /** Bytes of regular file content written (a sparse file's data, not its holes). */
  bytes: number;
  /** Whiteouts converted to overlay form: `.wh.NAME` files and `.wh..wh..opq` opaque markers. */
  whiteouts: number;
  /** Entries not extracted: the root entry, aufs metadata, device nodes and whiteouts without privilege. */
  skipped: number;
  /** What was skipped or dropped and why, for the first {@link MAX_WARNINGS} cases. */
  warnings: string[];
  /** Milliseconds spent reading tar headers and writing the tree, waits for tar bytes excluded. */
  extractMs: number;
  /**
   * CPU the addon's writer threads spent making this layer's small files (unpack/filesink.ts), each on its
   * own thread clock: work done beside {@link extractMs}, not inside it. 0 when no file went to them;
   * absent where the addon has no writer threads or no clock for them (files are then written in line).
   */
  writerCpuMs?: number;
  /**
   * What only the layers below can settle, for {@link reconcileWithLowers} once they are committed:
   * parents this layer implies but never names, and the whiteouts it made.
   */
  lowerChecks: LowerChecks;
}

/** How many warnings {@link ApplyStats.warnings} keeps: a layer of ten thousand device nodes must not make a huge list. */
export const MAX_WARNINGS = 32;

/** The statistics of one apply and the entry it is on, for messages that name both. */
export class ApplyReport {
  readonly stats: ApplyStats = {
    entries: 0,
    files: 0,
    bytes: 0,
    whiteouts: 0,
    skipped: 0,
    warnings: [],
    extractMs: 0,
    lowerChecks: { impliedDirs: [], whiteouts: [] },
  };
  /** Names the layer and the entry being applied: the start of every message about it. */
  label = '';
  /** `entry` and `offset` of the entry being applied, for errors' details. */
  entryDetails: Record<string, unknown> = {};

  /** `what`: what the apply is doing, naming the layer and the destination. */
  constructor(readonly what: string) {}

  /** Counts `e` and makes it the entry messages name. */
  begin(e: ParsedTarEntry): void {
    this.stats.entries++;
    const name = display(e.name);
    this.label = `${this.what}: entry ${JSON.stringify(name)}`;
    this.entryDetails = { entry: name, offset: e.offset };
  }

  /** Fails the apply over the current entry. */
  refuse(code: 'HOSTILE_LAYER' | 'INVALID_LAYER', message: string, details: Record<string, unknown> = {}): never {
    throw new FastpullError(code, `${this.label}: ${message}`, { details: { ...this.entryDetails, ...details } });
  }

  /** Notes what was skipped or dropped (`message` names it); `skippedEntry` when the whole entry was. */
  warn(message: string, skippedEntry: boolean): void {
    if (skippedEntry) this.stats.skipped++;
    if (this.stats.warnings.length < MAX_WARNINGS) this.stats.warnings.push(message);
  }
}

/** Filesystem failures: ENOSPC -> NO_SPACE; names the layer cannot have -> INVALID_LAYER; else INTERNAL. */
export function fsError(e: unknown, what: string, details: Record<string, unknown>): FastpullError {
  const code = errnoOf(e);
  const layerFault = code === 'ENAMETOOLONG' || code === 'EINVAL' || code === 'ELOOP' || code === 'EFBIG';
  const err = fromFsError(e, what, layerFault ? 'INVALID_LAYER' : 'INTERNAL');
  return new FastpullError(err.code, err.message, { cause: e, details: { ...details, errno: code } });
}
