// The library's records, events, timings and gc results survive the wire: converted, encoded as
// protobuf by the same definitions the server and client load, decoded, and converted back.
import { describe, expect, it } from 'vitest';
import type { Digest, GcResult, ImageRecord, LayerState, Mount, PullEvent, PullTimings, TraceDocument } from '@fastpull/core';
import type { SnapshotInfo } from '@fastpull/core/snapshots';
import {
  blobFromWire,
  blobToWire,
  eventFromWire,
  eventToWire,
  gcFromWire,
  gcToWire,
  imageFromWire,
  imageToWire,
  mountFromWire,
  mountToWire,
  snapshotFromWire,
  snapshotToWire,
  timingsFromWire,
  timingsToWire,
  traceFromWire,
  traceToWire,
  type PullPlacement,
} from './convert.js';
import { serviceDefinition } from './proto.js';

const digest = (c: string): Digest => `sha256:${c.repeat(64).slice(0, 64)}` as Digest;

/** A response encoded to bytes and decoded as a client of `service` decodes `method`'s answers. */
function overTheWire<T>(service: string, method: string, message: T): T {
  const m = serviceDefinition(service)[method]!;
  return m.responseDeserialize(m.responseSerialize(message)) as T;
}
const images = (m: ReturnType<typeof imageToWire>[]) => overTheWire('fastpull.v1.Images', 'List', { images: m }).images;
const pullMessage = (m: ReturnType<typeof eventToWire>) => overTheWire('fastpull.v1.Images', 'Pull', m);

const minimal: ImageRecord = {
  name: 'registry.test/app:v1',
  target: { mediaType: 'application/vnd.oci.image.manifest.v1+json', digest: digest('1'), size: 900 },
  manifest: { mediaType: 'application/vnd.oci.image.manifest.v1+json', digest: digest('1'), size: 900 },
  config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: digest('2'), size: 300 },
  platform: { os: 'linux', architecture: 'amd64' },
  layers: [{ digest: digest('3'), size: 4096, mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', diffID: digest('4'), chainID: digest('4') }],
  chainID: digest('4'),
  size: 4096,
  created: '2026-01-02T03:04:05.678Z',
};

const full: ImageRecord = {
  name: 'registry.test/multi:v2',
  target: { mediaType: 'application/vnd.oci.image.index.v1+json', digest: digest('5'), size: 700, annotations: { 'org.opencontainers.image.ref.name': 'v2' } },
  manifest: {
    mediaType: 'application/vnd.oci.image.manifest.v1+json',
    digest: digest('6'),
    size: 1200,
    urls: ['https://mirror.test/blob'],
    platform: { os: 'linux', architecture: 'arm64', variant: 'v8' },
  },
  config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: digest('7'), size: 310 },
  platform: { os: 'windows', architecture: 'amd64', 'os.version': '10.0.17763.1234', 'os.features': ['win32k'] },
  layers: [
    { digest: digest('8'), size: 5_000_000_000, mediaType: 'application/vnd.oci.image.layer.v1.tar+zstd', diffID: digest('9'), chainID: digest('9') },
    { digest: digest('a'), size: 12, mediaType: 'application/vnd.oci.image.layer.v1.tar', diffID: digest('b'), chainID: digest('c') },
  ],
  chainID: digest('c'),
  size: 5_000_000_012,
  unpackedSize: 9_000_000_000,
  keepBlobs: true,
  created: '2026-01-02T03:04:05.678Z',
  heldFor: 'containerd',
  signatures: {
    outcome: 'logged',
    verdicts: [
      {
        kind: 'sigstore',
        level: 'strict',
        outcome: 'verified',
        scope: 'registry.test/multi',
        signature: digest('d'),
        checks: [
          { signature: digest('d'), check: 'authenticity', ok: true, message: 'signed by the key in /etc/keys/a.pub' },
          { signature: digest('d'), check: 'integrity', ok: true, message: 'names this manifest' },
        ],
      },
      // A verdict without scope or signature, one check of the image as a whole.
      { kind: 'notation', level: 'audit', outcome: 'logged', checks: [{ check: 'discovery', ok: false, message: 'no Notary signature found' }] },
    ],
    verifiedAt: '2026-01-02T03:04:05.600Z',
  },
};

const timings: PullTimings = {
  resolveMs: 12.5,
  totalMs: 340.25,
  layers: [
    { digest: digest('8'), fetchMs: 100, unpackMs: 200, waitMs: 10, verifyMs: 20, decompressMs: 30, extractMs: 40, commitMs: 5, state: 'committed' },
    // Every optional field set, one of them 0: set-to-0 and unset must both survive as they are.
    {
      digest: digest('9'),
      fetchMs: 90,
      unpackMs: 150,
      waitMs: 9,
      verifyMs: 19,
      decompressMs: 29,
      extractMs: 39,
      commitMs: 4,
      state: 'committed',
      threadCpuMs: 120.5,
      blobHashCpuMs: 0,
      inflateCpuMs: 61.75,
      tarHashCpuMs: 33.25,
      writerCpuMs: 18.5,
      ztocCheckpoints: 7,
      releasedBytes: 5 * 1024 ** 3,
    },
    // The writers' CPU at 0 (a sink existed, no file went to it) beside an unset decoder clock.
    {
      digest: digest('c'),
      fetchMs: 1,
      unpackMs: 2,
      waitMs: 0,
      verifyMs: 0,
      decompressMs: 1,
      extractMs: 1,
      commitMs: 1,
      state: 'committed',
      threadCpuMs: 1.5,
      writerCpuMs: 0,
    },
    // The decoder's CPU alone, at 0 (a layer whose pass decoded nothing measurable), the rest unset.
    { digest: digest('b'), fetchMs: 1, unpackMs: 2, waitMs: 0, verifyMs: 0, decompressMs: 1, extractMs: 1, commitMs: 1, state: 'committed', inflateCpuMs: 0 },
    { digest: digest('a'), fetchMs: 0, unpackMs: 0, waitMs: 0, verifyMs: 0, decompressMs: 0, extractMs: 0, commitMs: 0, state: 'exists' },
  ],
  phases: { fetchMs: 100, verifyMs: 20, decompressMs: 30, extractMs: 40, commitMs: 5 },
};

describe('image records', () => {
  it('come back equal, with their keys in the same order, whether optional fields are set or not', () => {
    for (const record of [minimal, full]) {
      const back = imageFromWire(images([imageToWire(record)])[0]);
      expect(back).toEqual(record);
      // Printed from the daemon, a record reads as one printed from the store.
      expect(JSON.stringify(back)).toBe(JSON.stringify(record));
    }
  });

  it('take the unpacked size given: null (unknown) leaves it out', () => {
    expect(imageFromWire(images([imageToWire(full, null)])[0]).unpackedSize).toBeUndefined();
    expect(imageFromWire(images([imageToWire(minimal, 77)])[0]).unpackedSize).toBe(77);
  });

  it('refuse a missing image', () => {
    expect(() => imageFromWire(null)).toThrow(/no image/);
  });
});

describe('progress events', () => {
  const placement: PullPlacement = {
    root: '/var/lib/fastpull',
    snapshots: ['/var/lib/fastpull/snapshots/sha256/9', '/var/lib/fastpull/snapshots/sha256/c'],
    mounts: [{ type: 'overlay', source: 'overlay', options: ['lowerdir=/a:/b', 'ro'] }],
  };
  const states: LayerState[] = ['waiting', 'fetching', 'verifying', 'extracting', 'committed', 'exists'];

  it('resolved, every layer state, and done with where the image lies', () => {
    const events: PullEvent[] = [
      {
        type: 'resolved',
        name: full.name,
        manifest: full.manifest.digest,
        platform: full.platform,
        layers: full.layers.map((l) => ({ digest: l.digest, size: l.size, chainID: l.chainID })),
      },
      ...states.map((state, i): PullEvent => ({ type: 'layer', index: i, digest: digest('8'), state, bytes: i * 1000, total: 5_000_000_000 })),
    ];
    for (const e of events) expect(eventFromWire(pullMessage(eventToWire(e)))).toEqual({ event: e });
    const done: PullEvent = { type: 'done', image: full, timings };
    expect(eventFromWire(pullMessage(eventToWire(done, placement)))).toEqual({ event: done, placement });
  });

  it('an unpack position of 0 is sent, and its absence stays absent', () => {
    const at = (unpacked?: number): PullEvent => ({
      type: 'layer',
      index: 1,
      digest: digest('a'),
      state: 'extracting',
      bytes: 12,
      total: 12,
      ...(unpacked !== undefined ? { unpacked } : {}),
    });
    for (const e of [at(0), at(7), at()]) expect(eventFromWire(pullMessage(eventToWire(e))).event).toEqual(e);
    expect('unpacked' in eventFromWire(pullMessage(eventToWire(at()))).event).toBe(false);
  });

  it('a message the client cannot read is an error, not a guess', () => {
    expect(() => eventFromWire(pullMessage({}))).toThrow(/empty progress message/);
    const bad = { layer: { index: 0, digest: digest('8'), state: 'LAYER_STATE_WAITING' as const, bytes: 0, total: 1, unpack: null } };
    expect(() => eventFromWire({ layer: { ...bad.layer, state: 'LAYER_STATE_SOMETHING' as never } })).toThrow(/unknown layer state/);
  });

  it('a trace travels as its JSON document; one that is not a trace is INTERNAL', () => {
    const trace: TraceDocument = { traceEvents: [{ name: 'fetch', ph: 'X', ts: 1, dur: 2, pid: 1, tid: 1 }] } as unknown as TraceDocument;
    const sent = pullMessage(traceToWire(trace));
    expect(traceFromWire(sent.trace!.json)).toEqual(trace);
    expect(() => traceFromWire('{')).toThrow(expect.objectContaining({ code: 'INTERNAL' }));
    expect(() => traceFromWire('{"events":[]}')).toThrow(expect.objectContaining({ code: 'INTERNAL', message: expect.stringContaining('traceEvents') }));
  });
});

describe('timings', () => {
  it('come back equal; the phases on the wire still carry the resolve time for older readers', () => {
    const wire = timingsToWire(timings);
    expect(wire.phases!.resolveMs).toBe(timings.resolveMs);
    const done = pullMessage({ done: { image: imageToWire(minimal), timings: wire, root: '', snapshots: [], mounts: [] } });
    expect(timingsFromWire(done.done!.timings)).toEqual(timings);
  });

  it('refuse missing timings', () => {
    expect(() => timingsFromWire(null)).toThrow(/no timings/);
  });
});

describe('gc results, snapshots, mounts and blobs', () => {
  it('a gc result comes back equal, and the wire says whether it was a dry run', () => {
    const result: GcResult = {
      blobs: [{ digest: digest('d'), size: 10 }],
      snapshots: [{ chainID: digest('e'), size: 4_000_000_000 }],
      litter: 3,
      leftovers: [
        { kind: 'lease', path: 'leases/1234-abcd' },
        { kind: 'ingest', path: 'content/ingest/sha256-ab' },
        { kind: 'temp', path: 'images/.tmp-x' },
      ],
      bytes: 4_000_000_010,
      images: [{ name: 'registry.test/app:v1', platform: 'linux/amd64' }],
    };
    for (const dryRun of [true, false]) {
      const wire = overTheWire('fastpull.v1.Content', 'GarbageCollect', gcToWire(result, dryRun));
      expect(wire.dryRun).toBe(dryRun);
      expect(gcFromWire(wire)).toEqual(result);
      // In the library's key order, as a local collection's result prints.
      expect(Object.keys(gcFromWire(wire))).toEqual(Object.keys(result));
    }
    const empty: GcResult = { blobs: [], snapshots: [], litter: 0, leftovers: [], bytes: 0, images: [] };
    expect(gcFromWire(overTheWire('fastpull.v1.Content', 'GarbageCollect', gcToWire(empty, false)))).toEqual(empty);
  });

  it('snapshots with and without a parent, rootless or not', () => {
    const snaps: SnapshotInfo[] = [
      { chainID: digest('4'), diffID: digest('4'), size: 100, created: '2026-01-02T03:04:05.000Z' },
      { chainID: digest('c'), diffID: digest('b'), parent: digest('4'), size: 200, created: '2026-01-02T03:04:06.000Z', rootless: true },
    ];
    const wire = overTheWire('fastpull.v1.Snapshots', 'List', { snapshots: snaps.map(snapshotToWire) });
    expect(wire.snapshots.map(snapshotFromWire)).toEqual(snaps);
  });

  it('mounts and blobs', () => {
    const mounts: Mount[] = [
      { type: 'overlay', source: 'overlay', options: ['lowerdir=/x:/y', 'index=off'] },
      { type: 'bind', source: '/x', options: ['ro', 'rbind'] },
    ];
    expect(overTheWire('fastpull.v1.Snapshots', 'Mounts', { mounts: mounts.map(mountToWire) }).mounts.map(mountFromWire)).toEqual(mounts);
    const blob = { digest: digest('f'), size: 6_000_000_000 };
    expect(blobFromWire(overTheWire('fastpull.v1.Content', 'Info', { info: blobToWire(blob) }).info)).toEqual(blob);
    expect(() => blobFromWire(overTheWire('fastpull.v1.Content', 'Info', { info: null }).info)).toThrow(/no blob/);
  });
});
