// The tree of what one layer made in its snapshot directory, and the containment rules every write goes through.
//
// Only this apply writes below the root, so the tree is the truth about it: a parent that is not a
// directory here was put there by the layer itself, and going through it (a symlink above all)
// could write outside the snapshot. Paths are clean, relative and raw (see rawpath.ts).
import fs from 'node:fs';
import type { LowerChecks } from '../../snapshots/lowers.js';
import { type ApplyReport, fsError } from './report.js';
import { baseOf, display, RawRoot } from './rawpath.js';
import { setTimesFd, type Times } from './times.js';

const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW } = fs.constants;

/** What this layer made at a path; `whiteout` is a deletion in the whiteout converter's form. */
export type Kind = 'dir' | 'file' | 'symlink' | 'special' | 'whiteout';

/** A path this layer made. Directories hold their children by name (raw bytes as latin1). */
export interface Node {
  kind: Kind;
  children?: Map<string, Node>;
  /** The mode and times finish() gives a directory; no times for a parent the layer never named (`implied`). */
  meta?: { mode: number; times?: Times; implied?: true };
}

/**
 * The node of a path that is not a directory: one shared, frozen object per kind, as nothing is kept
 * on such a node but its kind. A layer of a million files holds a million of them in its tree: a
 * node each took 32 bytes more per file (92 against 61 bytes a file in a tree of 200,000).
 */
export function leaf(kind: Exclude<Kind, 'dir'>): Node {
  return LEAVES[kind];
}

const LEAVES: Readonly<Record<Exclude<Kind, 'dir'>, Node>> = {
  file: Object.freeze({ kind: 'file' }),
  symlink: Object.freeze({ kind: 'symlink' }),
  special: Object.freeze({ kind: 'special' }),
  whiteout: Object.freeze({ kind: 'whiteout' }),
};

/** The paths one layer made below a root directory, and the only way entries are placed there. */
export class LayerTree {
  readonly root: Node = { kind: 'dir', children: new Map() };
  /** Raw paths below the root; temporary names avoid every path of the tree. */
  readonly paths: RawRoot;

  /**
   * `dirOverDeletion(dir)`: a directory was just made where this layer had put a deletion (a
   * whiteout, then an entry below its name), so the layers below must not show through it.
   */
  constructor(
    root: string,
    private readonly report: ApplyReport,
    private readonly dirOverDeletion: (dir: string) => void,
  ) {
    this.paths = new RawRoot(root, (rel) => this.lookup(rel) !== undefined);
  }

  /** The node at `rel`, or undefined. A parent that is not a directory is hostile when `through` says what is being looked up. */
  lookup(rel: string, through?: string): Node | undefined {
    if (rel === '') return this.root;
    let node: Node = this.root;
    let start = 0;
    for (;;) {
      const slash = rel.indexOf('/', start);
      const part = slash === -1 ? rel.slice(start) : rel.slice(start, slash);
      const child = node.children?.get(part);
      if (child === undefined) return undefined;
      if (slash === -1) return child;
      if (child.kind !== 'dir') {
        if (through === undefined) return undefined;
        this.report.refuse('HOSTILE_LAYER', `${through} goes through ${JSON.stringify(display(rel.slice(0, slash)))}, a ${child.kind}`, {
          parent: display(rel.slice(0, slash)),
          parentKind: child.kind,
        });
      }
      node = child;
      start = slash + 1;
    }
  }

  /**
   * Makes way for a new entry at `rel`: parents exist as directories, nothing is left at `rel`
   * (unless both old and new are directories, which merge). Returns the parent's children.
   */
  prepare(rel: string, isDir: boolean): Map<string, Node> {
    const children = this.ensureParents(rel);
    const base = baseOf(rel);
    const existing = children.get(base);
    if (existing === undefined || (existing.kind === 'dir' && isDir)) return children;
    const abs = this.paths.fs(rel);
    if (existing.kind === 'dir')
      fs.rmSync(abs, { recursive: true, force: true }); // never follows symlinks
    else fs.unlinkSync(abs);
    children.delete(base);
    return children;
  }

  /** Makes the parents of `rel` directories (0755 in the end, as containerd does); a parent that is not a directory is hostile. Returns the parent's children. */
  ensureParents(rel: string): Map<string, Node> {
    let node = this.root;
    let start = 0;
    for (let slash = rel.indexOf('/'); slash !== -1; slash = rel.indexOf('/', start)) {
      node = this.ensureChildDir(node, rel, slash);
      start = slash + 1;
    }
    return node.children!;
  }

  /** Makes `dir` and its parents exist as directories. */
  ensureDir(dir: string): void {
    if (dir === '') return;
    this.ensureChildDir({ kind: 'dir', children: this.ensureParents(dir) }, dir, dir.length);
  }

  /**
   * Applies directory modes and mtimes, deepest first (making children changed them), through
   * descriptors, and lists in `lowerChecks` the implied parents and the deletions made.
   */
  finish(lowerChecks: LowerChecks): void {
    const dirs: Array<[string, Node]> = [];
    const stack: Array<[string, Node]> = [['', this.root]];
    while (stack.length > 0) {
      const [rel, node] = stack.pop()!;
      if (node.meta !== undefined) dirs.push([rel, node]);
      if (node.meta?.implied === true) lowerChecks.impliedDirs.push(rel);
      for (const [name, child] of node.children ?? []) {
        const childRel = rel === '' ? name : `${rel}/${name}`;
        if (child.kind === 'dir') stack.push([childRel, child]);
        else if (child.kind === 'whiteout') lowerChecks.whiteouts.push(childRel);
      }
    }
    // Parents are pushed before their children, so the reverse order is children first.
    for (let i = dirs.length - 1; i >= 0; i--) {
      const [rel, { meta }] = dirs[i]!;
      try {
        const fd = fs.openSync(this.paths.fs(rel), O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
        try {
          fs.fchmodSync(fd, meta!.mode);
          if (meta!.times !== undefined) setTimesFd(fd, meta!.times);
        } finally {
          fs.closeSync(fd);
        }
      } catch (e) {
        throw fsError(e, `${this.report.what}: setting mode and times of ${JSON.stringify(display(rel))}`, { entry: display(rel) });
      }
    }
  }

  /** The directory node at `path.slice(0, end)`, whose parent is `parent`; made when missing. */
  private ensureChildDir(parent: Node, path: string, end: number): Node {
    const dir = path.slice(0, end);
    const name = baseOf(dir);
    const existing = parent.children!.get(name);
    if (existing?.kind === 'dir') return existing;
    if (existing?.kind === 'whiteout') {
      // `.wh.d`, then `d/f`: the lower `d` is gone and this layer's `d` holds `f` alone.
      fs.unlinkSync(this.paths.fs(dir));
      parent.children!.delete(name);
      const node = this.makeImpliedDir(parent, dir);
      this.dirOverDeletion(dir);
      return node;
    }
    if (existing !== undefined) {
      this.report.refuse('HOSTILE_LAYER', `parent ${JSON.stringify(display(dir))} of ${JSON.stringify(display(path))} is a ${existing.kind}, not a directory`, {
        path: display(path),
        parent: display(dir),
        parentKind: existing.kind,
      });
    }
    return this.makeImpliedDir(parent, dir);
  }

  /** A directory no entry named (yet): 0755 in the end, as containerd makes them, unless the layers below say otherwise. */
  private makeImpliedDir(parent: Node, dir: string): Node {
    fs.mkdirSync(this.paths.fs(dir), 0o700);
    const node: Node = { kind: 'dir', children: new Map(), meta: { mode: 0o755, implied: true } };
    parent.children!.set(baseOf(dir), node);
    return node;
  }
}
