// The extended attributes and mode bits that carry privilege, pulled from the CNCF distribution
// registry: file capabilities (security.capability), an SELinux label (security.selinux), POSIX ACLs
// (system.posix_acl_access, system.posix_acl_default) and setuid/setgid. As root every one lands as
// the layer says (a capability survives the chown to the file's owner); pulled by an unprivileged user
// (the rootless layout, for real: the CLI run under setpriv) the capability is dropped (EPERM: only a
// writer with CAP_SETFCAP may set one), and everything else lands, setuid and setgid included. Where
// an SELinux policy is loaded the label is the policy's to allow: those cases say so and skip.
import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, lstatSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore, pull } from '@fastpull/core';
import {
  buildImage,
  type BuiltImage,
  findDistributionBinary,
  lacks,
  lacksRegistry,
  lacksRoot,
  notHere,
  pushImage,
  startDistribution,
} from '@fastpull/core/testing';
import { paxRecord, rawHeader } from '../packages/core/src/unpack/apply/apply.testkit.js';
import { nativeFs } from '../packages/core/src/native/addon.js';
import { cliPath, tempDir } from './helpers.js';

if (!findDistributionBinary()) console.warn('skipping the named xattr pulls: docker-registry is not installed (scripts/bootstrap.sh installs it)');

/** vfs_cap_data revision 2: cap_net_bind_service permitted and effective. */
const CAPABILITY = Buffer.from('0100000200040000000000000000000000000000', 'hex');
/** An access ACL: owner rw, user 1000 r, group r, mask r, other r (version 2, then tag, perm, id). */
const ACL = Buffer.from('0200000001000600ffffffff02000400e803000004000400ffffffff10000400ffffffff20000400ffffffff', 'hex');
const SELINUX = Buffer.from('system_u:object_r:bin_t:s0\0');
const NOBODY = 65534;
/** With an SELinux policy loaded, setting security.selinux is the policy's decision, not the unpacker's. */
const selinux = existsSync('/sys/fs/selinux/enforce') ? 'an SELinux policy is loaded: it decides which labels a file may take' : undefined;

/** One tar entry with PAX records (owner and xattrs) before it, written raw: the values are binary. */
function entry(name: string, type: '0' | '5', mode: number, uid: number, xattrs: Record<string, Buffer>): Buffer[] {
  const body = type === '0' ? Buffer.from(`${name}\n`) : Buffer.alloc(0);
  const records = [
    paxRecord('uid', Buffer.from(String(uid))),
    paxRecord('gid', Buffer.from(String(uid))),
    ...Object.entries(xattrs).map(([k, v]) => paxRecord(`SCHILY.xattr.${k}`, v)),
  ];
  const pax = Buffer.concat(records);
  const pad = (b: Buffer): Buffer => Buffer.concat([b, Buffer.alloc((512 - (b.length % 512)) % 512)]);
  return [rawHeader(`PaxHeaders/${name}`, 'x', pax.length), pad(pax), rawHeader(name, type, body.length, mode), pad(body)];
}

const LAYER = Buffer.concat([
  ...entry('bin/', '5', 0o755, 0, {}),
  ...entry('bin/cap', '0', 0o755, 0, { 'security.capability': CAPABILITY }),
  ...entry('bin/cap-owned', '0', 0o750, 1000, { 'security.capability': CAPABILITY }),
  ...entry('bin/suid', '0', 0o4755, 0, {}),
  ...entry('bin/sgid-owned', '0', 0o2755, 1000, {}),
  ...entry('bin/labelled', '0', 0o644, 0, { 'security.selinux': SELINUX }),
  ...entry('bin/acl', '0', 0o644, 0, { 'system.posix_acl_access': ACL }),
  ...entry('shared/', '5', 0o755, 0, { 'system.posix_acl_default': ACL }),
  Buffer.alloc(1024),
]);

interface Seen {
  readonly mode: string;
  readonly uid: number;
  readonly xattrs: Record<string, string>;
}

/** Mode bits, owner and every xattr (hex) of each named path under `dir`. */
function look(dir: string, paths: readonly string[]): Record<string, Seen> {
  const native = nativeFs();
  return Object.fromEntries(
    paths.map((p) => {
      const abs = join(dir, p);
      const st = lstatSync(abs);
      const xattrs = Object.fromEntries(native.llistxattr(abs).map((k) => [k, native.lgetxattr(abs, k)!.toString('hex')]));
      return [p, { mode: (st.mode & 0o7777).toString(8), uid: st.uid, xattrs }];
    }),
  );
}

const PATHS = ['bin/cap', 'bin/cap-owned', 'bin/suid', 'bin/sgid-owned', 'bin/labelled', 'bin/acl', 'shared'];
const hex = (b: Buffer): string => b.toString('hex');

describe.skipIf(lacksRegistry())('pulling files with privileged xattrs and mode bits', () => {
  const work = tempDir('named-xattrs');
  let registry: Awaited<ReturnType<typeof startDistribution>>;
  let image: BuiltImage;
  let ref = '';

  beforeAll(async () => {
    registry = await startDistribution({ dir: join(work.dir, 'registry') });
    image = await buildImage({ layers: [LAYER] });
    await pushImage(registry.url, 'xattrs/app', '1', image);
    ref = `${registry.host}/xattrs/app:1`;
  });
  afterAll(async () => {
    await registry?.stop();
    work.cleanup();
  });

  it.skipIf(lacksRoot() || notHere(selinux))('as root keeps them all: capabilities (past the chown), the label, both ACLs, setuid and setgid', async () => {
    const root = join(work.dir, 'rootful');
    const { image: rec } = await pull(ref, { root });
    const seen = look(openStore(root).snapshots.fsPath(rec.chainID), PATHS);
    expect(seen).toEqual({
      'bin/cap': { mode: '755', uid: 0, xattrs: { 'security.capability': hex(CAPABILITY) } },
      'bin/cap-owned': { mode: '750', uid: 1000, xattrs: { 'security.capability': hex(CAPABILITY) } },
      'bin/suid': { mode: '4755', uid: 0, xattrs: {} },
      'bin/sgid-owned': { mode: '2755', uid: 1000, xattrs: {} },
      'bin/labelled': { mode: '644', uid: 0, xattrs: { 'security.selinux': hex(SELINUX) } },
      'bin/acl': { mode: '644', uid: 0, xattrs: { 'system.posix_acl_access': hex(ACL) } },
      shared: { mode: '755', uid: 0, xattrs: { 'system.posix_acl_default': hex(ACL) } },
    });
  });

  // Root is needed only to become the unprivileged user; the pull itself runs as that user.
  it.skipIf(
    lacksRoot() || notHere(selinux) || lacks('setpriv', spawnSync('setpriv', ['--version']).status === 0 ? undefined : 'setpriv (util-linux) is not installed'),
  )('as an unprivileged user drops the capabilities and keeps the rest, setuid and setgid on files the user owns', () => {
    const home = join(work.dir, 'nobody');
    mkdirSync(home);
    chmodSync(work.dir, 0o755);
    chownSync(home, NOBODY, NOBODY);
    const root = join(home, 'store');
    const r = spawnSync('setpriv', [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', process.execPath, cliPath, 'pull', '--root', root, ref], {
      encoding: 'utf8',
      env: { ...process.env, HOME: home, XDG_CONFIG_HOME: home, XDG_RUNTIME_DIR: home },
    });
    expect(r.status, r.stderr).toBe(0);
    const chain = image.layers[0]!.diffID;
    const seen = look(openStore(root).snapshots.fsPath(chain), PATHS);
    expect(seen).toEqual({
      'bin/cap': { mode: '755', uid: NOBODY, xattrs: {} },
      'bin/cap-owned': { mode: '750', uid: NOBODY, xattrs: {} },
      'bin/suid': { mode: '4755', uid: NOBODY, xattrs: {} },
      'bin/sgid-owned': { mode: '2755', uid: NOBODY, xattrs: {} },
      'bin/labelled': { mode: '644', uid: NOBODY, xattrs: { 'security.selinux': hex(SELINUX) } },
      'bin/acl': { mode: '644', uid: NOBODY, xattrs: { 'system.posix_acl_access': hex(ACL) } },
      shared: { mode: '755', uid: NOBODY, xattrs: { 'system.posix_acl_default': hex(ACL) } },
    });
  });
});
