// Campaign 1, crash consistency: kill -9 the puller (the fastpull CLI and the fastpulld daemon) and
// the collector (`fastpull gc`, also racing a pull) at many points chosen by a seeded prng: at byte
// offsets of a blob as the registry serves it, while a layer is being extracted, around commits
// and record writes, and while garbage is collected. After each kill: the store opens (library and
// `fastpull images`), test/store-verify.ts finds every committed blob and snapshot whole and nothing
// half-done visible, no process of the killed group lingers, and the next pull (or gc) completes,
// fetching only what the store did not already hold (counted by the registry), the snapshots
// matching the image builder's trees entry by entry, and leaves nothing a collection would remove
// (the pull reclaims what the killed process left: its lease, downloads, blobs nothing keeps).
//
// Default: 56 kill points in three lanes, at least 50 of them must land before the victim finishes
// (about 150 s of CPU, most of it node start-ups; 91-96 s wall on the shared 2-core machine at
// load average 4). FASTPULL_RELIABILITY_LONG=1: five times as many (at least 250).
// FASTPULL_CRASH_SEED=N runs another seed (printed on failure and in the summary);
// FASTPULL_CRASH_ONLY=ID,ID replays chosen kill points of it.
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, lutimesSync, mkdirSync, mkdtempSync, promises as fsp, readdirSync, readFileSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chainIDs, collectGarbage, formatReference, mountsFor, openStore, parseReference, pull, type Digest, type PullEvent } from '@fastpull/core';
import {
  buildImage,
  type BuiltImage,
  diffTrees,
  lacks,
  notHere,
  type LayerEntry,
  type LoopbackRegistry,
  Prng,
  readTree,
  startLoopbackRegistry,
  type TreeEntry,
} from '@fastpull/core/testing';
import { FastpullClient } from '@fastpull/daemon';
import { cliPath, overlayUnavailable, repoRoot, runCliAsync, tempDir } from './helpers.js';
import { resumeBound, snapshotTreesOf, verifyStore, type StoreReport } from './store-verify.js';

const LONG = process.env.FASTPULL_RELIABILITY_LONG === '1';
const SEED = Number(process.env.FASTPULL_CRASH_SEED ?? 8_0001);
const SCALE = LONG ? 5 : 1;
const daemonBin = join(repoRoot, 'packages', 'daemon', 'dist', 'bin.js');
/** Kill points run in this many independent lanes at once (each with its own registry and stores). */
const LANES = Math.max(1, Number(process.env.FASTPULL_CRASH_LANES ?? 3));
const VERBOSE = process.env.FASTPULL_CRASH_VERBOSE === '1';

/** Kill points per kind in a default run (times SCALE in the long one). */
const COUNTS = { cliFetchStall: 11, cliFetchRanges: 6, cliExtract: 8, cliCommit: 10, gc: 6, race: 7, daemon: 8 } as const;
/** Shard files of the big layer (model/shards/s0000...), written in this order by the extractor. */
const SHARDS = 300;
const shardName = (i: number) => `s${String(i).padStart(4, '0')}`;
/** Files of B's own big layer: what a collection deletes file by file once B is forgotten (enough to take a while). */
const GARBAGE_FILES = 1500;
/** Bytes of the big layer's one large file (random, so the blob is about this large). */
const WEIGHTS = 3 * 1024 * 1024;
/** Rough cost of a kill point of each kind, to deal them out to the lanes evenly. */
const COST_MS: Record<'cli' | 'daemon' | 'gc' | 'race', number> = { cli: 2000, daemon: 3000, gc: 2500, race: 2500 };
/** A run must survive at least this many kill points (a trigger that comes too late is a miss, not a pass). */
const MIN_KILLS = 50 * SCALE;
/** Per kill point: the killed process must be dead, and the trigger must come, within this. */
const STEP_TIMEOUT_MS = 20_000;
/** Throttle for the fetch kill points, so that offsets are reached at a known pace and the ingest's ranges record (every 250 ms) is written along the way. */
const FETCH_RATE = 8 * 1024 * 1024;
/** Per-response throttle when blobs go as many small ranges (16 in flight). */
const RANGES_RATE = 1024 * 1024;

const work = tempDir('crash-campaign');
afterAll(() => work.cleanup());

// ---------------------------------------------------------------------------------------------
// The images: A has four layers, one of them 3.4 MiB compressed with 300 small files and a 3 MiB
// file, so fetch, extraction and commit each take measurable time; B shares A's bottom two layers
// and has two of its own (one with 1500 files, so that collecting it takes time).

interface Images {
  readonly a: BuiltImage;
  readonly b: BuiltImage;
}

async function buildImages(): Promise<Images> {
  const prng = new Prng(4242);
  const base: LayerEntry[] = [{ type: 'dir', path: 'etc', mode: 0o755 }];
  for (let i = 0; i < 60; i++) base.push({ type: 'file', path: `etc/conf/c${i}.conf`, content: prng.text(prng.int(100, 2000)) });
  base.push({ type: 'symlink', path: 'etc/current', target: 'conf/c0.conf' });
  const big: LayerEntry[] = [];
  for (let i = 0; i < SHARDS; i++) big.push({ type: 'file', path: `model/shards/${shardName(i)}`, content: prng.binary(prng.int(512, 3072)) });
  big.push({ type: 'file', path: 'model/weights.bin', content: prng.bytes(WEIGHTS) });
  const libs: LayerEntry[] = [];
  for (let i = 0; i < 40; i++) libs.push({ type: 'file', path: `usr/lib/m${i}.so`, content: prng.binary(prng.int(4096, 32768)), mode: 0o755 });
  const top: LayerEntry[] = [
    { type: 'file', path: 'app/run', content: '#!/bin/sh\necho run\n', mode: 0o755 },
    { type: 'hardlink', path: 'app/run2', target: 'app/run' },
    { type: 'dir', path: 'var/empty', mode: 0o700, uid: 5, gid: 6 },
  ];
  const many: LayerEntry[] = [];
  for (let i = 0; i < GARBAGE_FILES; i++) many.push({ type: 'file', path: `srv/data/d${i}`, content: prng.text(prng.int(50, 800)) });
  const own: LayerEntry[] = [{ type: 'file', path: 'srv/b.txt', content: 'image b\n' }];
  const a = await buildImage({ layers: [base, big, libs, top] });
  const b = await buildImage({ layers: [base, big, many, own] });
  expect(b.layers[1]!.digest).toBe(a.layers[1]!.digest);
  return { a, b };
}

// ---------------------------------------------------------------------------------------------
// Processes: each victim runs in its own process group, so whatever it spawned (igzip) is found.

interface Victim {
  readonly child: ChildProcess;
  readonly pid: number;
  readonly events: PullEvent[];
  readonly output: () => string;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function startVictim(script: string, args: string[]): Victim {
  const child = spawn(process.execPath, [script, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
    env: { ...process.env, FASTPULLD_CONFIG: '' },
  });
  const events: PullEvent[] = [];
  const t0 = performance.now();
  let out = '';
  let buf = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
    buf += d.toString();
    for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      try {
        const e = JSON.parse(line) as PullEvent;
        if (typeof e === 'object' && e !== null && 'type' in e) {
          events.push(e);
          if (VERBOSE && e.type === 'layer') console.log(`  pid ${child.pid} +${Math.round(performance.now() - t0)} ms layer ${e.index} ${e.state} ${e.bytes}`);
        }
      } catch {
        // not an event (the daemon's log lines are JSON too, and harmless here)
      }
    }
  });
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  return { child, pid: child.pid!, events, output: () => out, exited };
}

/** Pids whose process group is `pgid` (from /proc). */
function groupMembers(pgid: number): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // fields[0] is the state, [1] ppid, [2] pgrp; a zombie awaiting its reaper does not count.
      if (Number(fields[2]) === pgid && fields[0] !== 'Z') out.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** Waits until nothing of the killed victim's process group runs; returns how many lingered at first. */
async function groupGone(pgid: number): Promise<number> {
  const first = groupMembers(pgid).length;
  const end = Date.now() + 5_000;
  for (let left = groupMembers(pgid); left.length > 0; left = groupMembers(pgid)) {
    if (Date.now() > end) {
      for (const pid of left) process.kill(pid, 'SIGKILL');
      throw new Error(`processes of the killed group ${pgid} still run 5 s after the kill: ${left.join(', ')}`);
    }
    await sleep(20);
  }
  return first;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Kills `victim` with SIGKILL `delayMs` after `cond` first holds (polled every millisecond).
 * Resolves 'killed' when SIGKILL ended it, 'missed' when it exited on its own first.
 */
function killWhen(victim: Victim, cond: () => boolean, delayMs: number, what: string): Promise<'killed' | 'missed'> {
  return new Promise((resolve, reject) => {
    let fired = false;
    const kill = () => {
      // Never signal a pid that has been reaped (and could be reused).
      if (victim.child.exitCode !== null || victim.child.signalCode !== null) return;
      try {
        process.kill(victim.pid, 'SIGKILL');
      } catch {
        // already gone: it exited on its own
      }
    };
    const timer = setInterval(() => {
      if (fired) return;
      let hit = false;
      try {
        hit = cond();
      } catch {
        hit = false;
      }
      if (!hit) return;
      fired = true;
      clearInterval(timer);
      if (delayMs <= 0) kill();
      else setTimeout(kill, delayMs);
    }, 1);
    const deadline = setTimeout(() => {
      clearInterval(timer);
      kill();
      reject(new Error(`the trigger (${what}) did not come within ${STEP_TIMEOUT_MS} ms; output: ${victim.output().slice(-2000)}`));
    }, STEP_TIMEOUT_MS);
    void victim.exited.then(({ signal }) => {
      clearInterval(timer);
      clearTimeout(deadline);
      resolve(signal === 'SIGKILL' ? 'killed' : 'missed');
    });
  });
}

// ---------------------------------------------------------------------------------------------
// Store probes used by the triggers.

function names(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/**
 * Whether the big layer's extraction, in any active snapshot, has written shard file `shard` (they
 * come in tar order, so the n-th exists once n have been written) or `weights` bytes of weights.bin.
 * One stat per active snapshot: cheap enough to poll every millisecond.
 */
function extracted(root: string, probe: { shard: number } | { weights: number }): boolean {
  const active = join(root, 'snapshots', 'active');
  for (const id of names(active)) {
    const fs = join(active, id, 'fs', 'model');
    if ('shard' in probe) {
      if (existsSync(join(fs, 'shards', shardName(probe.shard)))) return true;
    } else {
      try {
        if (statSync(join(fs, 'weights.bin')).size >= probe.weights) return true;
      } catch {
        // not there (yet)
      }
    }
  }
  return false;
}

/**
 * Sets back by two minutes the times of what a dead writer left without an owner lock: temporary
 * files of atomic writes, and ingest, active snapshot and lease directories without an owner file
 * (killed between making the directory and claiming it, or while removing it). Returns
 * how many. (Nothing else runs on the store when this is called.)
 */
function ageLitter(root: string): number {
  const past = new Date(Date.now() - 120_000);
  let n = 0;
  const blobs = join(root, 'content', 'blobs');
  for (const dir of [join(root, 'images'), join(root, 'snapshots', 'l'), ...names(blobs).map((a) => join(blobs, a))]) {
    for (const name of names(dir).filter((x) => x.startsWith('.tmp-'))) {
      lutimesSync(join(dir, name), past, past);
      n++;
    }
  }
  for (const dir of [join(root, 'content', 'ingest'), join(root, 'snapshots', 'active'), join(root, 'leases')]) {
    for (const id of names(dir).filter((x) => !existsSync(join(dir, x, 'owner')))) {
      utimesSync(join(dir, id), past, past);
      n++;
    }
  }
  return n;
}

const committedCount = (root: string) => names(join(root, 'snapshots', 'committed')).length;
const infoWritten = (root: string) => names(join(root, 'snapshots', 'active')).some((id) => existsSync(join(root, 'snapshots', 'active', id, 'info.json')));
const imageRecords = (root: string) => names(join(root, 'images')).filter((n) => n.endsWith('.json')).length;
const blobCount = (root: string) => names(join(root, 'content', 'blobs', 'sha256')).length;
const trashCount = (root: string) => names(join(root, 'snapshots', 'trash')).length;

// ---------------------------------------------------------------------------------------------
// Kill points.

type Phase = 'fetch' | 'extract' | 'commit' | 'gc';
type Kind = 'cli' | 'daemon' | 'gc' | 'race';

interface KillPoint {
  readonly id: number;
  readonly kind: Kind;
  readonly phase: Phase;
  /** Human-readable: what triggers the kill. */
  readonly what: string;
  /** Extra CLI or daemon arguments. */
  readonly args: readonly string[];
  /** Registry faults while the victim runs. */
  readonly faults: () => LoopbackRegistry['faults'];
  /** The trigger; polled every millisecond. */
  readonly when: (root: string, victim: Victim, reg: LoopbackRegistry) => boolean;
  /** Milliseconds from the trigger to SIGKILL. */
  readonly delayMs: number;
  /** How the next pull runs: the library in this process, or the CLI. */
  readonly resumeWith: 'library' | 'cli';
  /** Race kill points: which of the two is killed. */
  readonly victim?: 'pull' | 'gc';
  /** Also run `fastpull images` on the killed store. */
  readonly cliImages: boolean;
}

function planKillPoints(prng: Prng, imgs: Images): KillPoint[] {
  const a = imgs.a;
  const out: KillPoint[] = [];
  let id = 0;
  const common = () => ({ id: id++, resumeWith: prng.chance(0.2) ? ('cli' as const) : ('library' as const), cliImages: prng.chance(0.15) });
  const pickLayer = () => (prng.chance(0.6) ? 1 : prng.pick([0, 2, 3]));
  const stall = (kind: 'cli' | 'daemon'): KillPoint => {
    const li = pickLayer();
    const layer = a.layers[li]!;
    const offset = prng.int(1, layer.size - 1);
    const delayMs = prng.int(5, 150);
    return {
      ...common(),
      kind,
      phase: 'fetch',
      what: `layer ${li} served up to byte ${offset} of ${layer.size}, then stalled; +${delayMs} ms`,
      args: [],
      faults: () => ({ bytesPerSecond: FETCH_RATE, stallAfter: { path: new RegExp(`/blobs/${layer.digest}$`), times: 1, bytes: offset } }),
      when: (_root, _v, reg) => reg.stats.blobBytesServed(layer.digest) >= offset,
      delayMs,
    };
  };
  const extract = (kind: 'cli' | 'daemon'): KillPoint => {
    const byShards = prng.chance(0.5);
    const n = byShards ? prng.int(1, SHARDS) : prng.int(1, WEIGHTS - 1);
    return {
      ...common(),
      kind,
      phase: 'extract',
      what: byShards ? `the big layer's active snapshot holds ${n} of ${SHARDS} shard files` : `weights.bin in the active snapshot reached ${n} bytes`,
      args: [],
      faults: () => ({}),
      when: (root) => extracted(root, byShards ? { shard: n - 1 } : { weights: n }),
      delayMs: 0,
    };
  };
  const commit = (kind: 'cli' | 'daemon'): KillPoint => {
    const how = prng.pick(
      kind === 'cli' ? (['metadata', 'snapshots', 'info', 'event', 'record'] as const) : (['metadata', 'snapshots', 'info', 'record'] as const),
    );
    const k = prng.int(1, 3);
    const delayMs = prng.pick([0, 0, 1, 2, 5, 10]);
    const rate = prng.chance(0.5) ? FETCH_RATE : undefined;
    const base = { ...common(), kind, phase: 'commit' as const, args: [], faults: () => (rate === undefined ? {} : { bytesPerSecond: rate }) };
    switch (how) {
      case 'snapshots':
        return { ...base, what: `${k} snapshot(s) renamed into committed/; +${delayMs} ms`, when: (root) => committedCount(root) >= k, delayMs };
      case 'info':
        return {
          ...base,
          what: `an active snapshot's info.json written (about to be renamed), or ${k} committed`,
          when: (root) => infoWritten(root) || committedCount(root) >= k,
          delayMs: 0,
        };
      case 'event':
        return {
          ...base,
          what: `the CLI reported ${k} layer(s) committed; +${delayMs} ms`,
          when: (_r, v) => v.events.filter((e) => e.type === 'layer' && e.state === 'committed').length >= k,
          delayMs,
        };
      case 'record':
        return { ...base, what: 'the image record written (lease not yet released)', when: (root) => imageRecords(root) >= 1, delayMs: 0 };
      case 'metadata':
        // The manifest and config are committed (temp file, fsync, rename) right after resolving.
        return { ...base, what: `the first metadata blob committed; +${delayMs} ms`, when: (root) => blobCount(root) >= 1, delayMs };
    }
  };
  for (let i = 0; i < COUNTS.cliFetchStall * SCALE; i++) out.push(stall('cli'));
  for (let i = 0; i < COUNTS.cliFetchRanges * SCALE; i++) {
    const li = pickLayer();
    const layer = a.layers[li]!;
    const offset = prng.int(1, layer.size - 1);
    out.push({
      ...common(),
      kind: 'cli',
      phase: 'fetch',
      what: `layer ${li} fetched as 64 KiB ranges, killed once ${offset} of ${layer.size} bytes were served`,
      args: ['--chunk-size', '64KiB'],
      faults: () => ({ bytesPerSecond: RANGES_RATE }),
      when: (_root, _v, reg) => reg.stats.blobBytesServed(layer.digest) >= offset,
      delayMs: 0,
    });
  }
  for (let i = 0; i < COUNTS.cliExtract * SCALE; i++) out.push(extract('cli'));
  for (let i = 0; i < COUNTS.cliCommit * SCALE; i++) out.push(commit('cli'));
  for (let i = 0; i < COUNTS.gc * SCALE; i++) {
    const how = prng.pick(['trash', 'discard', 'blob', 'time'] as const);
    const delayMs = how === 'time' ? prng.int(250, 450) : how === 'trash' ? prng.int(0, 40) : 0;
    out.push({
      ...common(),
      kind: 'gc',
      phase: 'gc',
      what:
        how === 'trash'
          ? `fastpull gc renamed a snapshot into trash/; +${delayMs} ms (deleting its files)`
          : how === 'discard'
            ? 'fastpull gc took its first snapshot out of committed/ (holding the collection lock)'
            : how === 'blob'
              ? 'fastpull gc deleted its first blob'
              : `fastpull gc, ${delayMs} ms after it started`,
      args: [],
      faults: () => ({}),
      when:
        how === 'trash'
          ? (root) => trashCount(root) > 0
          : how === 'discard'
            ? (root) => committedCount(root) < GC_TEMPLATE_SNAPSHOTS
            : how === 'blob'
              ? (root) => blobCount(root) < GC_TEMPLATE_BLOBS
              : () => true,
      delayMs,
    });
  }
  for (let i = 0; i < COUNTS.race * SCALE; i++) {
    const victim = prng.pick(['pull', 'gc'] as const);
    const byTrash = victim === 'gc' && prng.chance(0.5);
    const delayMs = victim === 'pull' ? prng.int(0, 300) : byTrash ? prng.int(0, 10) : prng.int(300, 600);
    out.push({
      ...common(),
      kind: 'race',
      phase: 'gc',
      victim,
      what:
        victim === 'pull'
          ? `pull of B racing fastpull gc; the puller killed ${delayMs} ms after it resolved B`
          : byTrash
            ? `pull of B racing fastpull gc; the collector killed ${delayMs} ms after it renamed a snapshot into trash/`
            : `pull of B racing fastpull gc; the collector killed ${delayMs} ms after both started`,
      args: [],
      faults: () => ({ bytesPerSecond: FETCH_RATE }),
      when: victim === 'pull' ? (_root, v) => v.events.some((e) => e.type === 'resolved') : byTrash ? (root) => trashCount(root) > 0 : () => true,
      delayMs,
    });
  }
  const daemonKinds = [stall, extract, commit];
  for (let i = 0; i < COUNTS.daemon * SCALE; i++) out.push(daemonKinds[i % 3]!('daemon'));
  return out;
}

/** Blobs and committed snapshots in the gc template store (set when it is built). */
let GC_TEMPLATE_BLOBS = 0;
let GC_TEMPLATE_SNAPSHOTS = 0;

// ---------------------------------------------------------------------------------------------
// What each kill point is checked for, and the figures of the run.

interface Figures {
  killed: number;
  missed: number;
  byPhase: Record<Phase, number>;
  byKind: Record<Kind, number>;
  lingering: number;
  servedBeforeKill: number;
  servedOnResume: number;
  resumeBound: number;
  refetchedAvoided: number;
  treesCompared: number;
  litterAfterResume: { ingests: number; active: number; trash: number; leases: number; tmp: number };
  cliImages: number;
  aged: number;
  problems: number;
  ms: number;
}

const figures: Figures = {
  killed: 0,
  missed: 0,
  byPhase: { fetch: 0, extract: 0, commit: 0, gc: 0 },
  byKind: { cli: 0, daemon: 0, gc: 0, race: 0 },
  lingering: 0,
  servedBeforeKill: 0,
  servedOnResume: 0,
  resumeBound: 0,
  refetchedAvoided: 0,
  treesCompared: 0,
  litterAfterResume: { ingests: 0, active: 0, trash: 0, leases: 0, tmp: 0 },
  cliImages: 0,
  aged: 0,
  problems: 0,
  ms: 0,
};

function servedOf(reg: LoopbackRegistry, image: BuiltImage): Map<Digest, number> {
  return new Map(image.layers.map((l) => [l.digest, reg.stats.blobBytesServed(l.digest)]));
}

function expectClean(report: StoreReport, context: string): void {
  figures.problems += report.problems.length;
  expect(report.problems, context).toEqual([]);
}

// ---------------------------------------------------------------------------------------------

/** One lane of kill points: its own registry (faults and byte counters are per registry) and daemon. */
interface Lane {
  readonly index: number;
  readonly reg: LoopbackRegistry;
  readonly refA: string;
  readonly refB: string;
  readonly dir: string;
  daemon?: { victim: Victim; client: FastpullClient };
}

const noOverlay = overlayUnavailable();
if (noOverlay !== undefined) console.warn(`crash campaign: the merged tree is not mounted: ${noOverlay}`);

describe('crash consistency: kill -9 at many points (campaign 1)', () => {
  let imgs: Images;
  let trees: Map<Digest, Map<string, TreeEntry>>;
  const lanes: Lane[] = [];
  let gcTemplate = '';
  /** The store kill point #0 left, after its next pull (mounted by the last test). */
  let keptRoot = '';

  beforeAll(async () => {
    imgs = await buildImages();
    trees = snapshotTreesOf(imgs.a, imgs.b);
    for (let index = 0; index < LANES; index++) {
      const reg = await startLoopbackRegistry();
      reg.addImage('crash/a', '1', imgs.a);
      reg.addImage('crash/b', '1', imgs.b);
      lanes.push({ index, reg, refA: `${reg.host}/crash/a:1`, refB: `${reg.host}/crash/b:1`, dir: mkdtempSync(join(work.dir, `lane${index}-`)) });
    }
    // The gc template: A and B pulled, B forgotten, so B's own two snapshots and its manifest and
    // config are garbage; A's four snapshots (two shared with B) are not.
    gcTemplate = join(work.dir, 'gc-template');
    await pull(lanes[0]!.refA, { root: gcTemplate });
    await pull(lanes[0]!.refB, { root: gcTemplate });
    expect(await openStore(gcTemplate).images.delete(formatReference(parseReference(lanes[0]!.refB)))).toBe(true);
    GC_TEMPLATE_BLOBS = blobCount(gcTemplate);
    GC_TEMPLATE_SNAPSHOTS = committedCount(gcTemplate);
    expectClean(await verifyStore(gcTemplate, { snapshotTrees: trees }), 'gc template');
  });
  afterAll(async () => {
    for (const lane of lanes) {
      if (lane.daemon) {
        await lane.daemon.client.close();
        lane.daemon.victim.child.kill('SIGKILL');
        await lane.daemon.victim.exited;
      }
      await lane.reg.close();
    }
  });

  it(
    `survives at least ${MIN_KILLS} kill points (seed ${SEED})`,
    async () => {
      const t0 = performance.now();
      const cpu0 = process.cpuUsage();
      const only = process.env.FASTPULL_CRASH_ONLY?.split(',').map(Number);
      const plan = planKillPoints(new Prng(SEED), imgs).filter((kp) => only === undefined || only.includes(kp.id));
      // Daemon kill points all go to the last lane; the rest are dealt out to balance the lanes' time.
      const queues: KillPoint[][] = lanes.map(() => []);
      const load = lanes.map(() => 0);
      for (const kp of plan) {
        const target = kp.kind === 'daemon' ? lanes.length - 1 : load.indexOf(Math.min(...load));
        queues[target]!.push(kp);
        load[target]! += COST_MS[kp.kind];
      }
      let failed = false;
      await Promise.all(
        lanes.map(async (lane, i) => {
          for (const kp of queues[i]!) {
            if (failed) return;
            const context = `seed ${SEED}, kill point #${kp.id} (${kp.kind}, ${kp.phase}): ${kp.what}`;
            try {
              const root = await runKillPoint(lane, kp, context);
              if (kp.id === 0) keptRoot = root;
            } catch (e) {
              failed = true;
              if (e instanceof Error && !e.message.includes(context)) e.message = `${context}: ${e.message}`;
              throw e;
            }
          }
        }),
      );

      figures.ms = Math.round(performance.now() - t0);
      const cpu = process.cpuUsage(cpu0);
      if (VERBOSE) console.log(`test process CPU: user ${(cpu.user / 1e6).toFixed(1)} s, system ${(cpu.system / 1e6).toFixed(1)} s`);
      const mb = (n: number) => `${(n / 1048576).toFixed(1)} MiB`;
      console.log(
        [
          `crash campaign (seed ${SEED}${LONG ? ', long' : ''}, ${lanes.length} lanes): ${figures.killed} kill points survived (${figures.missed} triggers came after the victim finished)`,
          `  by phase: fetch ${figures.byPhase.fetch}, extract ${figures.byPhase.extract}, commit ${figures.byPhase.commit}, gc ${figures.byPhase.gc}`,
          `  by victim: CLI pull ${figures.byKind.cli}, fastpulld ${figures.byKind.daemon}, fastpull gc ${figures.byKind.gc}, pull racing gc ${figures.byKind.race}`,
          `  bytes served before kills ${mb(figures.servedBeforeKill)}; on the next pulls ${mb(figures.servedOnResume)} (bound ${mb(figures.resumeBound)}); not fetched again ${mb(figures.refetchedAvoided)}`,
          `  snapshot trees compared ${figures.treesCompared}; fastpull images runs ${figures.cliImages}; processes of a killed group alive at the kill ${figures.lingering}; litter left after the next pulls ${JSON.stringify(figures.litterAfterResume)} (a collection's dry run then: nothing to remove, each time), of it aged a minute for collection ${figures.aged} (temp files and unclaimed dirs), after a collection 0; problems ${figures.problems}`,
          `  ${(figures.ms / 1000).toFixed(1)} s`,
        ].join('\n'),
      );
      if (only !== undefined) return; // a replay of chosen kill points
      expect(figures.killed).toBeGreaterThanOrEqual(MIN_KILLS);
      for (const p of ['fetch', 'extract', 'commit', 'gc'] as const) expect(figures.byPhase[p], p).toBeGreaterThan(0);
      for (const k of ['cli', 'daemon', 'gc', 'race'] as const) expect(figures.byKind[k], k).toBeGreaterThan(0);
    },
    LONG ? 3_600_000 : 600_000,
  );

  // One store the campaign left (kill point #0's, after its next pull), mounted: exactly the tree
  // the builder says image A is.
  it.skipIf(lacks('overlay', noOverlay))('mounts a store left by a kill point as exactly image A', async (ctx) => {
    // Left out on purpose is a skip; left out because the campaign failed is that campaign's failure, reported there.
    if (
      keptRoot === '' &&
      notHere(process.env.FASTPULL_CRASH_ONLY?.split(',').map(Number).includes(0) === false ? 'FASTPULL_CRASH_ONLY leaves kill point #0 out' : undefined)
    )
      ctx.skip();
    expect(keptRoot, 'kill point #0 kept no store: the campaign above failed').not.toBe('');
    const [m] = await mountsFor(openStore(keptRoot), formatReference(parseReference(lanes[0]!.refA)));
    const merged = mkdtempSync(join(work.dir, 'merged-'));
    execFileSync('mount', ['-t', m!.type, m!.source, '-o', m!.options.join(','), merged]);
    try {
      expect(diffTrees(imgs.a.expectedTree(), await readTree(merged))).toEqual([]);
    } finally {
      execFileSync('umount', [merged]);
    }
  });

  // Regression (found by kill point #29 of seed 80001: kill -9 one millisecond after the first
  // metadata blob appeared): a process killed inside writeFileAtomic leaves `.tmp-*` beside the
  // blobs, which nothing removed, ever. Collection now removes such files once a minute old.
  it('collection removes the temp files of writes a kill interrupted, once a minute old (regression)', async () => {
    const root = join(work.dir, 'tmp-litter');
    await pull(lanes[0]!.refA, { root });
    const past = new Date(Date.now() - 120_000);
    const places = [join(root, 'content', 'blobs', 'sha256'), join(root, 'images'), join(root, 'snapshots', 'l')];
    for (const [i, dir] of places.entries()) {
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, `.tmp-old${i}`), 'torn');
      lutimesSync(join(dir, `.tmp-old${i}`), past, past);
      writeFileSync(join(dir, `.tmp-young${i}`), 'being written');
    }
    const r = await collectGarbage(openStore(root));
    expect(r.litter).toBe(places.length);
    for (const [i, dir] of places.entries()) {
      expect(existsSync(join(dir, `.tmp-old${i}`))).toBe(false);
      // A young one may belong to a live writer about to rename it.
      expect(existsSync(join(dir, `.tmp-young${i}`))).toBe(true);
    }
    expectClean(await verifyStore(root, { snapshotTrees: trees }), 'after the collection');
    expect((await openStore(root).images.list()).map((i) => i.manifest.digest)).toEqual([imgs.a.manifestDigest]);
  });

  async function startDaemon(lane: Lane): Promise<{ victim: Victim; client: FastpullClient }> {
    const socket = join(lane.dir, 'd.sock');
    const victim = startVictim(daemonBin, ['--socket', socket, '--root', join(lane.dir, 'daemon-root'), '--log-level', 'warn']);
    const end = Date.now() + STEP_TIMEOUT_MS;
    const client = new FastpullClient(socket);
    for (;;) {
      if (victim.child.exitCode !== null || victim.child.signalCode !== null) throw new Error(`fastpulld exited: ${victim.output()}`);
      try {
        if ((await client.health()) === 'SERVING') return { victim, client };
      } catch {
        // not listening yet
      }
      if (Date.now() > end) throw new Error(`fastpulld did not serve within ${STEP_TIMEOUT_MS} ms: ${victim.output()}`);
      await sleep(25);
    }
  }

  /** One kill point: set up, start the victim, kill it at the trigger, check, resume, check. Returns the store root. */
  async function runKillPoint(lane: Lane, kp: KillPoint, context: string): Promise<string> {
    const { reg } = lane;
    const tk = performance.now();
    const lap = (what: string) => {
      if (VERBOSE) console.log(`#${kp.id} lane ${lane.index} ${kp.kind}/${kp.phase} ${what} at ${Math.round(performance.now() - tk)} ms`);
    };
    const image = kp.kind === 'gc' || kp.kind === 'race' ? imgs.b : imgs.a;
    const ref = image === imgs.a ? lane.refA : lane.refB;
    const root = kp.kind === 'daemon' ? join(lane.dir, 'daemon-root') : join(lane.dir, `kp-${kp.id}`);
    // Nothing here blocks the event loop for long: the other lane's trigger is polled on it.
    if (kp.kind === 'gc' || kp.kind === 'race') await promisify(execFile)('cp', ['-a', gcTemplate, root]);
    const committedBefore = new Set((await openStore(root).snapshots.list()).map((s) => s.chainID));
    // A committed snapshot cannot change: each is compared with its tree once per store.
    const compared = new Set<Digest>();
    const verify = async (what: string): Promise<StoreReport> => {
      const want = new Map([...trees].filter(([c]) => !compared.has(c)));
      const r = await verifyStore(root, { snapshotTrees: want });
      expectClean(r, `${context}: ${what}`);
      for (const c of r.treesCompared) compared.add(c);
      figures.treesCompared += r.treesCompared.length;
      return r;
    };

    reg.stats.reset();
    reg.faults = kp.faults();
    let victim: Victim;
    let survivor: Victim | undefined;
    let remote: Promise<unknown> | undefined;
    let remoteDone = false;
    if (kp.kind === 'daemon') {
      lane.daemon ??= await startDaemon(lane);
      victim = lane.daemon.victim;
      remote = lane.daemon.client.pull(ref).then(
        () => void (remoteDone = true),
        (e: unknown) => e,
      );
    } else if (kp.kind === 'cli') {
      victim = startVictim(cliPath, ['pull', '--json', '--root', root, ...kp.args, ref]);
    } else if (kp.kind === 'gc') {
      victim = startVictim(cliPath, ['gc', '--json', '--root', root]);
    } else {
      const puller = startVictim(cliPath, ['pull', '--json', '--root', root, ref]);
      const collector = startVictim(cliPath, ['gc', '--json', '--root', root]);
      [victim, survivor] = kp.victim === 'pull' ? [puller, collector] : [collector, puller];
    }
    lap('started');
    let outcome = await killWhen(victim, () => remoteDone || kp.when(root, victim, reg), kp.delayMs, kp.what);
    if (remote) {
      await remote;
      // The daemon outlives its pulls: a trigger that came after the pull finished missed it.
      if (remoteDone) outcome = 'missed';
    }
    const servedAtKill = servedOf(reg, image);
    if (outcome === 'missed') {
      figures.missed++;
      console.log(`crash campaign: trigger after the victim finished: ${context}`);
      // It finished before the trigger: still a store that must verify.
      if (kp.kind !== 'daemon') expect((await victim.exited).code, `${context}: ${victim.output().slice(-2000)}`).toBe(0);
    } else {
      figures.killed++;
      figures.byPhase[kp.phase]++;
      figures.byKind[kp.kind]++;
    }
    figures.lingering += await groupGone(victim.pid);
    if (survivor) {
      const s = await survivor.exited;
      expect(s.code, `${context}: the survivor failed: ${survivor.output().slice(-2000)}`).toBe(0);
    }
    figures.servedBeforeKill += [...servedAtKill.values()].reduce((n, b) => n + b, 0);
    lap(outcome);

    // The store as the kill left it.
    const killed = await verify('after the kill');
    // What was committed stays committed; collection may take only B's own, forgotten layers.
    const gcMayTake = new Set(chainIDs(imgs.b.layers.map((l) => l.diffID)).slice(2));
    for (const c of committedBefore) {
      if (!gcMayTake.has(c)) expect(await openStore(root).snapshots.isCommitted(c), `${context}: snapshot ${c} was lost`).toBe(true);
    }
    if (kp.cliImages) {
      const listed = await runCliAsync(['images', '--json', '--root', root]);
      expect(listed.status, `${context}: fastpull images: ${listed.stderr}`).toBe(0);
      expect((JSON.parse(listed.stdout) as { name: string }[]).length, context).toBe(killed.images);
      figures.cliImages++;
    }
    if (kp.kind === 'gc' || kp.kind === 'race') {
      // The next collection completes; B's forgotten layers go unless the racing pull brought B back.
      const r = await collectGarbage(openStore(root));
      const recorded = (await openStore(root).images.list()).length;
      if (recorded === 1) expect(r.snapshots.length + (await openStore(root).snapshots.list()).length, context).toBeGreaterThanOrEqual(4);
      expect(trashCount(root), context).toBe(0);
    }
    lap('verified');

    // The next pull completes, fetching only what is missing.
    // Why each layer's bound is what it is, for the message of a pull that fetched more.
    const why = new Map<Digest, string>();
    const bound = await resumeBound(root, image, await verifyStore(root), why);
    reg.stats.reset();
    reg.faults = {};
    if (kp.kind === 'daemon') {
      await lane.daemon!.client.close();
      lane.daemon = await startDaemon(lane);
      const r = await lane.daemon.client.pull(ref);
      expect(r.image.manifest.digest, context).toBe(image.manifestDigest);
    } else if (kp.resumeWith === 'cli') {
      const r = await runCliAsync(['pull', '--quiet', '--root', root, ref]);
      expect(r.status, `${context}: resume: ${r.stderr}`).toBe(0);
    } else {
      await pull(ref, { root });
    }
    lap('resumed');
    const served = servedOf(reg, image);
    let resumeTotal = 0;
    let boundTotal = 0;
    for (const l of image.layers) {
      const got = served.get(l.digest)!;
      const max = bound.get(l.digest)!;
      expect(
        got,
        `${context}: the next pull fetched ${got} bytes of ${l.digest} (${l.size} bytes); at most ${max} were missing (after the kill: ${why.get(l.digest)})`,
      ).toBeLessThanOrEqual(max);
      resumeTotal += got;
      boundTotal += max;
    }
    figures.servedOnResume += resumeTotal;
    figures.resumeBound += boundTotal;
    figures.refetchedAvoided += image.layers.reduce((n, l) => n + l.size, 0) - resumeTotal;

    const after = await verify('after the next pull');
    const rec = await openStore(root).images.get(formatReference(parseReference(ref)));
    expect(rec?.manifest.digest, context).toBe(image.manifestDigest);
    // Every snapshot of the image is committed, and its tree was compared with the builder's.
    for (const l of rec!.layers) expect(compared.has(l.chainID), `${context}: snapshot ${l.chainID} not compared`).toBe(true);
    const activeDir = join(root, 'snapshots', 'active');
    expect(
      names(activeDir).filter((id) => existsSync(join(activeDir, id, 'owner'))),
      `${context}: active snapshots with an owner after the pull`,
    ).toEqual([]);
    for (const k of ['ingests', 'active', 'trash', 'leases', 'tmp'] as const) figures.litterAfterResume[k] += after.litter[k];
    // The next pull reclaimed what the killed process left (its lease, its downloads of layers now
    // unpacked, blobs nothing keeps): a collection now would remove nothing.
    const dry = await collectGarbage(openStore(root), { dryRun: true });
    expect(dry, `${context}: what a collection would remove after the next pull`).toEqual({
      blobs: [],
      snapshots: [],
      litter: 0,
      leftovers: [],
      bytes: 0,
      images: [],
    });

    // A collection a minute later leaves nothing of the crash behind. (What a dead process left
    // without an owner lock, killed between making a file or directory and claiming or renaming
    // it, is removed only once a minute old, as its writer may still be alive: the test ages it.)
    figures.aged += ageLitter(root);
    if (kp.kind === 'daemon') {
      // ...and the next daemon kill point starts from an empty store.
      await lane.daemon!.client.removeImage(ref, { gc: true });
      expect(await openStore(root).snapshots.list(), context).toEqual([]);
    } else {
      await collectGarbage(openStore(root));
    }
    const swept = await verifyStore(root);
    expectClean(swept, `${context}: after a collection`);
    const left = ['content/ingest', 'snapshots/active', 'snapshots/trash', 'leases'].flatMap((d) =>
      names(join(root, d)).map((id) => `${d}/${id}: [${names(join(root, d, id)).join(', ')}]`),
    );
    expect(swept.litter, `${context}: litter after a collection: ${left.join('; ')}`).toEqual({ ingests: 0, active: 0, trash: 0, leases: 0, tmp: 0 });
    if (kp.kind !== 'daemon' && kp.id !== 0) await fsp.rm(root, { recursive: true, force: true });
    lap('done');
    return root;
  }
});
