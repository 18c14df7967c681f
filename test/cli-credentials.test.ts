// The CLI finds registry credentials where `docker pull` does: Docker's config.json.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { sampleImage, startLoopbackRegistry } from '@fastpull/core/testing';
import { runCliAsync, tempDir } from './helpers.js';

const work = tempDir('creds');
afterAll(() => work.cleanup());

describe('fastpull pull with Docker config credentials', () => {
  it('exchanges an identity token (OAuth2 refresh token) for a registry token', async () => {
    const reg = await startLoopbackRegistry({ auth: { type: 'bearer', username: 'erin', password: 'unused-pass', refreshToken: 'refresh-xyz-secret' } });
    try {
      reg.addImage('idt/app', '1', await sampleImage(4, { layers: 1 }));
      const cfg = join(work.dir, 'docker-idt');
      mkdirSync(cfg);
      writeFileSync(
        join(cfg, 'config.json'),
        JSON.stringify({ auths: { [reg.host]: { auth: Buffer.from('erin:').toString('base64'), identitytoken: 'refresh-xyz-secret' } } }),
      );
      const ok = await runCliAsync(['pull', '--root', join(work.dir, 'r-idt'), `${reg.host}/idt/app:1`], { DOCKER_CONFIG: cfg });
      expect(ok.status, ok.stderr).toBe(0);
      const posts = reg.stats.requests.filter((r) => r.method === 'POST' && r.path.startsWith('/token'));
      expect(posts.length).toBeGreaterThan(0);
      expect(posts.every((r) => r.status === 200)).toBe(true);
      expect(`${ok.stdout}${ok.stderr}`).not.toContain('refresh-xyz-secret');
    } finally {
      await reg.close();
    }
  });

  it('uses auths from $DOCKER_CONFIG/config.json and never prints the secret', async () => {
    const reg = await startLoopbackRegistry({ auth: { type: 'bearer', username: 'dana', password: 'hunter2-secret' } });
    try {
      reg.addImage('priv/app', '1', await sampleImage(3, { layers: 2 }));
      const ref = `${reg.host}/priv/app:1`;
      const noCreds = join(work.dir, 'none');
      mkdirSync(noCreds);
      const denied = await runCliAsync(['pull', '--root', join(work.dir, 'r1'), ref], { DOCKER_CONFIG: noCreds });
      expect(denied.status).toBe(1);
      expect(denied.stderr).toMatch(/^fastpull: pulling \S+\/priv\/app:1: .* \(UNAUTHORIZED\)$/m);

      const cfg = join(work.dir, 'docker');
      mkdirSync(cfg);
      writeFileSync(join(cfg, 'config.json'), JSON.stringify({ auths: { [reg.host]: { auth: Buffer.from('dana:hunter2-secret').toString('base64') } } }));
      const ok = await runCliAsync(['pull', '--root', join(work.dir, 'r2'), ref], { DOCKER_CONFIG: cfg });
      expect(ok.status, ok.stderr).toBe(0);
      expect(ok.stdout).toContain(`pulled ${ref}`);
      expect(reg.stats.tokensIssued).toBeGreaterThan(0);

      writeFileSync(join(cfg, 'config.json'), JSON.stringify({ auths: { [reg.host]: { auth: Buffer.from('dana:wrong-secret').toString('base64') } } }));
      const wrong = await runCliAsync(['pull', '--root', join(work.dir, 'r3'), ref], { DOCKER_CONFIG: cfg });
      expect(wrong.status).toBe(1);
      for (const out of [denied, ok, wrong]) expect(`${out.stdout}${out.stderr}`).not.toMatch(/hunter2|wrong-secret/);
    } finally {
      await reg.close();
    }
  });

  it('--creds user:password goes to the registry of the reference, before Docker config, and is never printed', async () => {
    const reg = await startLoopbackRegistry({ auth: { type: 'bearer', username: 'flag', password: 'flag-secret-1' } });
    try {
      reg.addImage('creds/app', '1', await sampleImage(5, { layers: 2 }));
      const ref = `${reg.host}/creds/app:1`;
      // Docker config holds wrong credentials for the host: the flag wins.
      const cfg = join(work.dir, 'docker-wrong');
      mkdirSync(cfg);
      writeFileSync(join(cfg, 'config.json'), JSON.stringify({ auths: { [reg.host]: { auth: Buffer.from('flag:config-secret-2').toString('base64') } } }));
      const ok = await runCliAsync(['pull', '--root', join(work.dir, 'r-flag'), '--creds', 'flag:flag-secret-1', ref], { DOCKER_CONFIG: cfg });
      expect(ok.status, ok.stderr).toBe(0);
      expect(reg.stats.tokensIssued).toBeGreaterThan(0);
      const json = await runCliAsync(['pull', '--root', join(work.dir, 'r-flag2'), '--json', '--debug', '--creds', 'flag:flag-secret-1', ref], {
        DOCKER_CONFIG: cfg,
      });
      expect(json.status, json.stderr).toBe(0);
      const wrong = await runCliAsync(['pull', '--root', join(work.dir, 'r-flag3'), '--debug', '--creds', 'flag:nope-secret-3', ref], { DOCKER_CONFIG: cfg });
      expect(wrong.status).toBe(1);
      expect(wrong.stderr).toMatch(/\(UNAUTHORIZED\)$/m);
      for (const out of [ok, json, wrong]) expect(`${out.stdout}${out.stderr}`).not.toMatch(/flag-secret|config-secret|nope-secret/);
    } finally {
      await reg.close();
    }
  });

  it('--creds never goes to a mirror: it is asked under its own host', async () => {
    // Both ask for the same user and password; only the upstream may get them.
    const auth = { type: 'basic', username: 'up', password: 'up-pass' } as const;
    const upstream = await startLoopbackRegistry({ auth });
    const mirror = await startLoopbackRegistry({ auth });
    try {
      const image = await sampleImage(6, { layers: 2 });
      upstream.addImage('m/app', '1', image);
      mirror.addImage('m/app', '1', image);
      const hosts = join(work.dir, 'hosts');
      mkdirSync(join(hosts, upstream.host), { recursive: true });
      writeFileSync(join(hosts, upstream.host, 'hosts.toml'), `server = "${upstream.url}"\n[host."${mirror.url}"]\n  capabilities = ["pull", "resolve"]\n`);
      const empty = join(work.dir, 'docker-empty');
      mkdirSync(empty);
      const r = await runCliAsync(['pull', '--root', join(work.dir, 'r-mirror'), '--hosts-dir', hosts, '--creds', 'up:up-pass', `${upstream.host}/m/app:1`], {
        DOCKER_CONFIG: empty,
      });
      expect(r.status, r.stderr).toBe(0);
      // The mirror was tried and refused (no credentials for it); the upstream served with them.
      expect(mirror.stats.requests.length).toBeGreaterThan(0);
      expect(mirror.stats.requests.every((q) => !q.authorization)).toBe(true);
      expect(upstream.stats.requests.some((q) => q.authorization && q.path.includes('/blobs/'))).toBe(true);
    } finally {
      await upstream.close();
      await mirror.close();
    }
  });
});
