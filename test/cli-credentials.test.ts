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
      writeFileSync(join(cfg, 'config.json'), JSON.stringify({ auths: { [reg.host]: { auth: Buffer.from('erin:').toString('base64'), identitytoken: 'refresh-xyz-secret' } } }));
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
});
