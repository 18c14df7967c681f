import { existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { collectGarbage } from '../../gc/gc.js';
import { chainIDs } from '../../oci/chainid.js';
import { sha256Digest } from '../../oci/digest.js';
import { openStore, type Store } from '../../store/root.js';
import { SnapshotRecords } from './records.js';

let root: string;
let store: Store;
let records: SnapshotRecords;
beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'fastpull-records-'));
  store = openStore(root);
  records = await SnapshotRecords.open(store, { indexOff: false });
});
afterEach(async () => {
  records.close();
  await rm(root, { recursive: true, force: true });
});

const dir = (): string => join(root, 'snapshots', 'containerd');
const idOf = (name: string): string => {
  for (const id of readdirSync(dir())) {
    if (id.startsWith('.') || !existsSync(join(dir(), id, 'record.json'))) continue;
    if ((JSON.parse(readFileSync(join(dir(), id, 'record.json'), 'utf8')) as { name: string }).name === name) return id;
  }
  throw new Error(`no record of ${name}`);
};
const fsOf = (name: string): string => join(dir(), idOf(name), 'fs');

async function commitChain(i: number, content: string): Promise<void> {
  const diffs = [sha256Digest('a'), sha256Digest('b')];
  const chains = chainIDs(diffs);
  const a = await store.snapshots.prepare();
  writeFileSync(join(a.fs, 'f'), content);
  await store.snapshots.commit(a, { chainID: chains[i]!, diffID: diffs[i]!, ...(i > 0 ? { parent: chains[i - 1]! } : {}), size: content.length });
}
const chain = (i: number) => chainIDs([sha256Digest('a'), sha256Digest('b')])[i]!;

describe('SnapshotRecords', () => {
  it('prepares, commits and chains snapshots with the mounts containerd gives', async () => {
    const m1 = await records.prepare('a1', undefined, { 'containerd.io/gc.root': 'x' });
    expect(m1).toEqual([{ type: 'bind', source: fsOf('a1'), options: ['rw', 'rbind'] }]);
    expect(records.stat('a1')).toMatchObject({ name: 'a1', kind: 'active', labels: { 'containerd.io/gc.root': 'x' } });
    expect(records.stat('a1').parent).toBeUndefined();
    expect(records.mounts('a1')).toEqual(m1);
    const id1 = idOf('a1');
    await records.commit('c1', 'a1', { l: 'v' });
    expect(() => records.stat('a1')).toThrow(expect.objectContaining({ code: 'NOT_FOUND' }));
    const c1 = records.stat('c1');
    expect(c1).toMatchObject({ name: 'c1', kind: 'committed', labels: { l: 'v' } });
    expect(c1.created).toBe(c1.updated);
    expect(c1.created).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$/);
    expect(idOf('c1')).toBe(id1); // committing moves nothing

    await records.prepare('a2', 'c1');
    await records.commit('c2', 'a2');
    const [active] = await records.prepare('a3', 'c2');
    expect(active).toEqual({
      type: 'overlay',
      source: 'overlay',
      options: [`workdir=${join(dir(), idOf('a3'), 'work')}`, `upperdir=${fsOf('a3')}`, `lowerdir=${fsOf('c2')}:${fsOf('c1')}`],
    });
    expect(await records.view('v1', 'c1')).toEqual([{ type: 'bind', source: fsOf('c1'), options: ['ro', 'rbind'] }]);
    expect(await records.view('v2', 'c2')).toEqual([{ type: 'overlay', source: 'overlay', options: [`lowerdir=${fsOf('c2')}:${fsOf('c1')}`] }]);
    expect(await records.view('v0', undefined)).toEqual([{ type: 'bind', source: fsOf('v0'), options: ['ro', 'rbind'] }]);
    expect(records.stat('v2')).toMatchObject({ kind: 'view', parent: 'c2' });
    expect(records.list().map((i) => i.name)).toEqual(['a3', 'c1', 'c2', 'v0', 'v1', 'v2']);
    expect(records.children('c1').sort()).toEqual(['c2', 'v1']);
  });

  it('answers with the codes containerd maps back', async () => {
    await records.prepare('a', undefined);
    await expect(records.prepare('a', undefined)).rejects.toMatchObject({ code: 'ALREADY_EXISTS' });
    await expect(records.view('a', undefined)).rejects.toMatchObject({ code: 'ALREADY_EXISTS' });
    await expect(records.prepare('b', 'missing')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(records.prepare('b', 'a')).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' }); // parent not committed
    await records.view('v', undefined);
    await expect(records.commit('c', 'v')).rejects.toMatchObject({ code: 'FAILED_PRECONDITION' });
    await expect(records.commit('c', 'missing')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await records.commit('c', 'a');
    expect(() => records.mounts('c')).toThrow(expect.objectContaining({ code: 'FAILED_PRECONDITION' }));
    await records.prepare('a2', undefined);
    await expect(records.commit('c', 'a2')).rejects.toMatchObject({ code: 'ALREADY_EXISTS' });
    await expect(records.commit('c-other', 'c')).rejects.toMatchObject({ code: 'FAILED_PRECONDITION' });
    await records.prepare('child', 'c');
    await expect(records.remove('c')).rejects.toMatchObject({ code: 'FAILED_PRECONDITION' });
    await expect(records.remove('missing')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(records.prepare('big', undefined, { k: 'v'.repeat(5000) })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(records.prepare('', undefined)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    // Removing the child frees the parent; a removed key can be used again, also as a committed name.
    const childDir = join(dir(), idOf('child'));
    await records.remove('child');
    expect(existsSync(childDir)).toBe(false);
    await records.remove('c');
    await records.commit('c', 'a2');
    expect(records.stat('c').kind).toBe('committed');
  });

  it('updates labels by field mask as containerd does', async () => {
    await records.prepare('a', undefined, { keep: 'k' });
    const before = records.stat('a');
    let info = await records.update({ name: 'a', labels: { l1: 'v1', l2: 'v2', l3: 'v3' } });
    expect(info.labels).toEqual({ l1: 'v1', l2: 'v2', l3: 'v3' });
    expect(info.created).toBe(before.created);
    expect(info.updated > before.updated).toBe(true);
    info = await records.update({ name: 'a', labels: { l1: 'updated', l4: 'v4' } }, ['labels.l1', 'labels.l2']);
    expect(info.labels).toEqual({ l1: 'updated', l3: 'v3' });
    info = await records.update({ name: 'a', labels: { l4: 'v4', empty: '' } }, ['labels']);
    expect(info.labels).toEqual({ l4: 'v4' });
    await expect(records.update({ name: 'a', labels: {} }, ['parent'])).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(records.update({ name: 'nope', labels: {} })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect(records.stat('a').labels).toEqual({ l4: 'v4' });
  });

  it('takes labels named as members of Object.prototype as any other, on disk and across a reopen', async () => {
    const odd = JSON.parse('{"__proto__":"p","constructor":"c","toString":"t"}') as Record<string, string>;
    await records.prepare('a', undefined, odd);
    expect({ ...records.stat('a').labels }).toEqual(odd);
    // A mask naming a label the update does not carry deletes it, even with no labels at all.
    expect({ ...(await records.update({ name: 'a' }, ['labels.toString', 'labels.valueOf'])).labels }).toEqual(
      JSON.parse('{"__proto__":"p","constructor":"c"}'),
    );
    expect({
      ...(await records.update({ name: 'a', labels: JSON.parse('{"__proto__":"q"}') as Record<string, string> }, ['labels.__proto__'])).labels,
    }).toEqual(JSON.parse('{"__proto__":"q","constructor":"c"}'));
    records.close();
    records = await SnapshotRecords.open(store, { indexOff: false });
    expect({ ...records.stat('a').labels }).toEqual(JSON.parse('{"__proto__":"q","constructor":"c"}'));
    expect(records.list(['labels.__proto__==q']).map((i) => i.name)).toEqual(['a']);
    expect(records.list(['labels.hasOwnProperty'])).toEqual([]);
  });

  it('filters as containerd: labels, parent, kind; any of several filters', async () => {
    await records.prepare('a', undefined);
    await records.commit('base', 'a', { 'containerd.io/snapshot.ref': 'sha256:aa' });
    await records.prepare('b', 'base');
    await records.commit('k8s.io/3/top', 'b', { 'containerd.io/snapshot.ref': 'sha256:bb' });
    const names = (f: string[]) => records.list(f).map((i) => i.name);
    expect(names(['labels."containerd.io/snapshot.ref"==sha256:bb,parent=="base"'])).toEqual(['k8s.io/3/top']);
    expect(names(['labels."containerd.io/snapshot.ref"==sha256:bb,parent=="other"'])).toEqual([]);
    expect(names(['kind==committed'])).toEqual(['base', 'k8s.io/3/top']);
    expect(names(['name~=^k8s', 'name==base'])).toEqual(['base', 'k8s.io/3/top']);
    expect(names(['labels."containerd.io/snapshot.ref"'])).toEqual(['base', 'k8s.io/3/top']);
    expect(names(['parent!=base'])).toEqual(['base']);
    expect(() => records.list(['labels."unterminated'])).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  });

  it('measures usage: active now, views nothing, committed once and kept in the record', async () => {
    await records.prepare('a', undefined);
    writeFileSync(join(fsOf('a'), 'f'), 'x'.repeat(10_000));
    mkdirSync(join(fsOf('a'), 'd'));
    const u = await records.usage('a');
    expect(u.inodes).toBe(3);
    expect(u.size).toBeGreaterThanOrEqual(10_000);
    await records.commit('c', 'a');
    expect(await records.usage('c')).toEqual(u);
    expect(JSON.parse(readFileSync(join(dir(), idOf('c'), 'record.json'), 'utf8')).usage).toEqual(u);
    await records.view('v', 'c');
    expect(await records.usage('v')).toEqual({ size: 0, inodes: 0 });
  });

  it('check() passes while the records read back as the ones held, and says why once they do not', async () => {
    await records.check();
    // Renamed away: nothing at the path.
    renameSync(dir(), `${dir()}.away`);
    await expect(records.check()).rejects.toMatchObject({ message: expect.stringMatching(/^reading the snapshot records in .*: ENOENT/) });
    // A directory of the same name that is not the one held (its lock file is another file).
    mkdirSync(dir());
    writeFileSync(join(dir(), '.lock'), '');
    await expect(records.check()).rejects.toMatchObject({ code: 'FAILED_PRECONDITION', message: expect.stringContaining('were replaced') });
    rmSync(dir(), { recursive: true });
    renameSync(`${dir()}.away`, dir());
    await records.check();
    records.close();
    await expect(records.check()).rejects.toMatchObject({ message: expect.stringContaining('are closed') });
  });

  it('keeps records across a restart, sweeps half-made and half-deleted snapshots, and has one owner', async () => {
    await records.prepare('a', undefined, { x: 'y' });
    await records.commit('c', 'a');
    await records.prepare('k8s.io/1/extract 1 sha256:ab', 'c');
    await expect(SnapshotRecords.open(store)).rejects.toMatchObject({ code: 'FAILED_PRECONDITION' });
    const before = records.list();
    records.close();
    // What a crash leaves: a snapshot made halfway, one removed halfway, a record write cut short.
    mkdirSync(join(dir(), '.new-x', 'fs'), { recursive: true });
    mkdirSync(join(dir(), '.trash-y', 'fs'), { recursive: true });
    writeFileSync(join(dir(), idOf('c'), '.tmp-123'), '{"half');
    // A directory no record owns stays until Cleanup.
    mkdirSync(join(dir(), 'abc-0123456789ab', 'fs'), { recursive: true });
    records = await SnapshotRecords.open(store);
    expect(records.list()).toEqual(before);
    expect(readdirSync(dir()).filter((n) => n.startsWith('.new') || n.startsWith('.trash'))).toEqual([]);
    expect(readdirSync(join(dir(), idOf('c')))).not.toContain('.tmp-123');
    expect(existsSync(join(dir(), 'abc-0123456789ab'))).toBe(true);
    expect(await records.cleanup()).toEqual(['abc-0123456789ab']);
    expect(existsSync(join(dir(), 'abc-0123456789ab'))).toBe(false);
    expect(records.list()).toEqual(before);
    expect(records.mounts('k8s.io/1/extract 1 sha256:ab')[0]!.options).toContain(`lowerdir=${fsOf('c')}`);
  });

  it('borrows committed chainID snapshots: removing the record leaves them, and collection keeps them while recorded', async () => {
    await commitChain(0, 'zero');
    await commitChain(1, 'one');
    await expect(records.commitChain('fastpull/x', undefined, sha256Digest('missing'))).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await records.commitChain('fastpull/0', undefined, chain(0), { 'containerd.io/snapshot.ref': chain(0) });
    await records.commitChain('fastpull/1', 'fastpull/0', chain(1), { 'containerd.io/snapshot.ref': chain(1) });
    expect(records.stat('fastpull/1')).toMatchObject({ kind: 'committed', parent: 'fastpull/0' });
    expect(readdirSync(join(dir(), idOf('fastpull/1')))).toEqual(['record.json']);
    // A container over the borrowed layers, and an own layer over them.
    const [m] = await records.prepare('ctr', 'fastpull/1');
    expect(m!.options.at(-1)).toBe(`lowerdir=${store.snapshots.fsPath(chain(1))}:${store.snapshots.fsPath(chain(0))}`);
    expect(await records.usage('fastpull/1')).toMatchObject({ inodes: 2 });

    // No image record names these chainIDs: only the records keep them.
    let gc = await collectGarbage(store);
    expect(gc.snapshots).toEqual([]);
    expect(await store.snapshots.isCommitted(chain(1))).toBe(true);
    expect(existsSync(join(fsOf('ctr'), '..', 'work'))).toBe(true); // a record's own dirs stay too

    await records.remove('ctr');
    await records.remove('fastpull/1');
    expect(await store.snapshots.isCommitted(chain(1))).toBe(true); // containerd's Remove drops the record only
    gc = await collectGarbage(store);
    expect(gc.snapshots.map((s) => s.chainID)).toEqual([chain(1)]);
    expect(await store.snapshots.isCommitted(chain(0))).toBe(true);
    await records.remove('fastpull/0');
    gc = await collectGarbage(store);
    expect(gc.snapshots.map((s) => s.chainID)).toEqual([chain(0)]);
  });

  it("names a stack of borrowed layers too long for a page of full paths by short links containerd's mount code can shorten further", async () => {
    const layers = 48;
    const diffs = Array.from({ length: layers }, (_, i) => sha256Digest(`layer ${i}`));
    const ids = chainIDs(diffs);
    for (let i = 0; i < layers; i++) {
      const a = await store.snapshots.prepare();
      writeFileSync(join(a.fs, `f${i}`), `${i}`);
      await store.snapshots.commit(a, { chainID: ids[i]!, diffID: diffs[i]!, ...(i > 0 ? { parent: ids[i - 1]! } : {}), size: 1 });
      await records.commitChain(`fastpull/${i}`, i > 0 ? `fastpull/${i - 1}` : undefined, ids[i]!, { 'containerd.io/snapshot.ref': ids[i]! });
    }
    const full = (n: number) =>
      ids
        .slice(0, n)
        .reverse()
        .map((id) => store.snapshots.fsPath(id));
    const lowers = (m: Awaited<ReturnType<typeof records.prepare>>) =>
      m[0]!.options
        .find((o) => o.startsWith('lowerdir='))!
        .slice('lowerdir='.length)
        .split(':');
    expect(full(layers).join(':').length).toBeGreaterThan(4096);

    // A stack that fits keeps the trees' own paths.
    expect(lowers(await records.prepare('short', `fastpull/${2}`))).toEqual(full(3));
    // One that does not: every borrowed layer by a link in one directory, top first, each to its tree.
    const m = await records.prepare('ctr', `fastpull/${layers - 1}`);
    const links = lowers(m);
    expect(links).toHaveLength(layers);
    expect(new Set(links.map((l) => dirname(l)))).toEqual(new Set([join(root, 'snapshots', 'l')]));
    expect(links.map((l) => readlinkSync(l))).toEqual(full(layers));
    // What containerd's mount code leaves of them under their common directory fits with room to spare.
    expect(links.map((l) => basename(l)).join(':').length).toBeLessThan(1024);
    expect(m[0]!.options).toContain(`upperdir=${fsOf('ctr')}`);
    expect(records.mounts('ctr')).toEqual(m);
    expect(lowers(await records.view('v', `fastpull/${layers - 1}`))).toEqual(links);

    // After a restart containerd gets the same mounts; collection keeps the links of borrowed layers.
    records.close();
    records = await SnapshotRecords.open(store, { indexOff: false });
    expect(records.mounts('ctr')).toEqual(m);
    expect((await collectGarbage(store)).snapshots).toEqual([]);
    expect(links.map((l) => readlinkSync(l))).toEqual(full(layers));
  });

  it('never lets collection touch the directories of its own snapshots', async () => {
    await records.prepare('a', undefined);
    writeFileSync(join(fsOf('a'), 'data'), 'kept');
    await records.commit('c', 'a');
    await records.prepare('top', 'c');
    await collectGarbage(store);
    expect(readFileSync(join(fsOf('c'), 'data'), 'utf8')).toBe('kept');
    expect(existsSync(join(dir(), idOf('top'), 'work'))).toBe(true);
    expect(records.list().map((i) => i.name)).toEqual(['c', 'top']);
  });
});
