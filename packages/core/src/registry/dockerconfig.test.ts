import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isFastpullError } from '../errors.js';
import { authKeyHost, defaultConfigPath, dockerConfigCredentials, runCredentialHelper } from './dockerconfig.js';

const SECRET = 'leaked-secret-value';
const b64 = (s: string) => Buffer.from(s).toString('base64');

let root: string;
let helperDir: string;
let logFile: string;
let env: NodeJS.ProcessEnv;

// A fake credential helper speaking the docker-credential-helpers protocol: server URL on stdin,
// JSON on stdout, "credentials not found" with a non-zero exit when it has nothing.
const TEST_HELPER = `#!/bin/sh
server=""
read -r server || true
echo "$server" >> "$HELPER_LOG"
case "$server" in
  ghcr.io) printf '{"ServerURL":"ghcr.io","Username":"helper-user","Secret":"helper-secret"}' ;;
  https://index.docker.io/v1/) printf '{"ServerURL":"%s","Username":"hub-user","Secret":"hub-secret"}' "$server" ;;
  token.example) printf '{"Username":"<token>","Secret":"identity-token"}' ;;
  fail.example) echo "boom: ${SECRET}" >&2; echo "${SECRET}"; exit 3 ;;
  garbage.example) echo "{not json ${SECRET}" ;;
  slow.example) sleep 600 ;;
  big.example) head -c 200000 /dev/zero | tr '\\0' 'x' ;;
  *) echo "credentials not found in native keychain"; exit 1 ;;
esac
`;
const OTHER_HELPER = `#!/bin/sh
read -r server || true
printf '{"Username":"other-user","Secret":"other-secret"}'
`;

async function writeConfig(name: string, config: unknown): Promise<string> {
  const dir = join(root, name);
  await mkdir(dir, { recursive: true });
  const path = join(dir, 'config.json');
  await writeFile(path, typeof config === 'string' ? config : JSON.stringify(config));
  return path;
}

async function helperCalls(): Promise<string[]> {
  try {
    return (await readFile(logFile, 'utf8')).split('\n').filter((l) => l !== '');
  } catch {
    return [];
  }
}

async function expectFailure(p: Promise<unknown>, code: string): Promise<Error> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(isFastpullError(e)).toBe(true);
  const err = e as Error & { code: string; details: unknown };
  expect(err.code).toBe(code);
  return err;
}

function expectNoSecret(e: Error): void {
  const all = JSON.stringify({ message: e.message, details: (e as { details?: unknown }).details, json: e, cause: String((e as { cause?: unknown }).cause) });
  expect(all).not.toContain(SECRET);
  expect(e.stack ?? '').not.toContain(SECRET);
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'fastpull-dockerconfig-'));
  helperDir = join(root, 'bin');
  await mkdir(helperDir);
  logFile = join(root, 'helper.log');
  for (const [name, script] of [
    ['docker-credential-test', TEST_HELPER],
    ['docker-credential-other', OTHER_HELPER],
  ] as const) {
    await writeFile(join(helperDir, name), script);
    await chmod(join(helperDir, name), 0o755);
  }
  env = { PATH: `${helperDir}:/usr/bin:/bin`, HELPER_LOG: logFile, SECRET, HOME: join(root, 'home') };
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('docker config file', () => {
  it('gives no credentials when the file does not exist', async () => {
    const creds = dockerConfigCredentials({ configPath: join(root, 'nope', 'config.json'), env });
    expect(await creds('ghcr.io')).toBeUndefined();
    // A missing DOCKER_CONFIG or HOME directory is the same.
    expect(await dockerConfigCredentials({ env: { ...env, DOCKER_CONFIG: join(root, 'missing') } })('ghcr.io')).toBeUndefined();
  });

  it('finds the file through DOCKER_CONFIG, else ~/.docker', async () => {
    expect(defaultConfigPath({ DOCKER_CONFIG: '/etc/dc' })).toBe('/etc/dc/config.json');
    expect(defaultConfigPath({ HOME: '/home/u' })).toBe('/home/u/.docker/config.json');
    const path = await writeConfig('via-env', { auths: { 'ghcr.io': { auth: b64('envuser:envpass') } } });
    const creds = dockerConfigCredentials({ env: { ...env, DOCKER_CONFIG: join(path, '..') } });
    expect(await creds('ghcr.io')).toEqual({ username: 'envuser', password: 'envpass' });
  });

  it('decodes base64 auth, splitting at the first colon', async () => {
    const path = await writeConfig('b64', { auths: { 'ghcr.io': { auth: b64('alice:pa:ss:word') } } });
    expect(await dockerConfigCredentials({ configPath: path, env })('ghcr.io')).toEqual({ username: 'alice', password: 'pa:ss:word' });
  });

  it('reads username and password fields, with auth winning over them', async () => {
    const path = await writeConfig('fields', {
      auths: {
        'quay.io': { username: 'bob', password: 'hunter2' },
        'ghcr.io': { auth: b64('from-auth:p1'), username: 'from-fields', password: 'p2' },
      },
    });
    const creds = dockerConfigCredentials({ configPath: path, env });
    expect(await creds('quay.io')).toEqual({ username: 'bob', password: 'hunter2' });
    expect(await creds('ghcr.io')).toEqual({ username: 'from-auth', password: 'p1' });
  });

  it('returns an identity token as the password of user <token>', async () => {
    const path = await writeConfig('idtoken', {
      auths: { 'myreg.azurecr.io': { auth: b64('00000000-0000-0000-0000-000000000000:'), identitytoken: 'refresh-token' } },
    });
    expect(await dockerConfigCredentials({ configPath: path, env })('myreg.azurecr.io')).toEqual({ username: '<token>', password: 'refresh-token' });
  });

  it("finds Docker Hub credentials under Docker's https://index.docker.io/v1/ key and the host forms other tools write", async () => {
    for (const key of ['https://index.docker.io/v1/', 'index.docker.io', 'docker.io', 'https://registry-1.docker.io/v2/']) {
      const path = await writeConfig(`hub-${authKeyHost(key)}`, { auths: { [key]: { auth: b64('hubber:pw') } } });
      const creds = dockerConfigCredentials({ configPath: path, env });
      expect(await creds('docker.io'), key).toEqual({ username: 'hubber', password: 'pw' });
      expect(await creds('index.docker.io'), key).toEqual({ username: 'hubber', password: 'pw' });
      expect(await creds('ghcr.io'), key).toBeUndefined();
    }
    // Docker's own key wins over a normalised match wherever it sits in the file.
    const path = await writeConfig('hub-both', { auths: { 'docker.io': { auth: b64('other:x') }, 'https://index.docker.io/v1/': { auth: b64('docker:y') } } });
    expect(await dockerConfigCredentials({ configPath: path, env })('docker.io')).toEqual({ username: 'docker', password: 'y' });
  });

  it('compares keys by host only and never answers for another host', async () => {
    const path = await writeConfig('hosts', {
      auths: {
        'https://ghcr.io/v2/': { auth: b64('g:1') },
        'http://localhost:5000': { auth: b64('l:2') },
        'Quay.IO': { auth: b64('q:3') },
      },
    });
    const creds = dockerConfigCredentials({ configPath: path, env });
    expect(await creds('ghcr.io')).toEqual({ username: 'g', password: '1' });
    expect(await creds('localhost:5000')).toEqual({ username: 'l', password: '2' });
    expect(await creds('quay.io')).toEqual({ username: 'q', password: '3' });
    for (const other of ['localhost', 'localhost:5001', 'evil.ghcr.io', 'ghcr.io.evil.com', 'docker.io']) expect(await creds(other), other).toBeUndefined();
    expect(authKeyHost('https://index.docker.io/v1/')).toBe('index.docker.io');
    expect(authKeyHost('registry.example:5000/some/path')).toBe('registry.example:5000');
  });

  it('refuses a malformed file without quoting it', async () => {
    const path = await writeConfig('broken', `{"auths": {"ghcr.io": {"auth": "${SECRET}" `);
    expectNoSecret(await expectFailure(Promise.resolve(dockerConfigCredentials({ configPath: path, env })('ghcr.io')), 'INVALID_ARGUMENT'));
    const bad = await writeConfig('bad-auth', { auths: { 'ghcr.io': { auth: `${SECRET}!!` } } });
    const e = await expectFailure(Promise.resolve(dockerConfigCredentials({ configPath: bad, env })('ghcr.io')), 'INVALID_ARGUMENT');
    expect(e.message).toContain('ghcr.io');
    expectNoSecret(e);
    const noColon = await writeConfig('no-colon', { auths: { 'ghcr.io': { auth: b64(SECRET) } } });
    expectNoSecret(await expectFailure(Promise.resolve(dockerConfigCredentials({ configPath: noColon, env })('ghcr.io')), 'INVALID_ARGUMENT'));
  });

  it('treats an empty file as an empty config', async () => {
    const path = await writeConfig('empty', '');
    expect(await dockerConfigCredentials({ configPath: path, env })('ghcr.io')).toBeUndefined();
  });
});

describe('credential helpers', () => {
  it('asks credHelpers first, then credsStore, and uses auths only when no helper is configured', async () => {
    const auths = {
      'quay.io': { auth: b64('auths-quay:x') },
      'ghcr.io': { auth: b64('auths-ghcr:x') },
      'nothere.example': { auth: b64('auths-nothere:x') },
    };
    const path = await writeConfig('precedence', { auths, credsStore: 'test', credHelpers: { 'quay.io': 'other' } });
    const creds = dockerConfigCredentials({ configPath: path, env });
    expect(await creds('quay.io')).toEqual({ username: 'other-user', password: 'other-secret' });
    expect(await creds('ghcr.io')).toEqual({ username: 'helper-user', password: 'helper-secret' });
    // As with the Docker CLI, a configured store's "not found" is final: auths is not consulted.
    expect(await creds('nothere.example')).toBeUndefined();

    const plain = await writeConfig('precedence-plain', { auths, credHelpers: { 'quay.io': 'other' } });
    const creds2 = dockerConfigCredentials({ configPath: plain, env });
    expect(await creds2('quay.io')).toEqual({ username: 'other-user', password: 'other-secret' });
    expect(await creds2('ghcr.io')).toEqual({ username: 'auths-ghcr', password: 'x' });
  });

  it("hands helpers Docker Hub's legacy URL and caches answers per registry", async () => {
    await rm(logFile, { force: true });
    const path = await writeConfig('hub-helper', { credsStore: 'test' });
    const creds = dockerConfigCredentials({ configPath: path, env });
    const [a, b] = await Promise.all([creds('docker.io'), creds('docker.io')]);
    expect(a).toEqual({ username: 'hub-user', password: 'hub-secret' });
    expect(b).toEqual(a);
    expect(await creds('docker.io')).toEqual(a);
    expect(await creds('unknown.example')).toBeUndefined();
    expect(await creds('unknown.example')).toBeUndefined();
    expect(await helperCalls()).toEqual(['https://index.docker.io/v1/', 'unknown.example']);
  });

  it('passes identity tokens from helpers through as user <token>', async () => {
    const path = await writeConfig('helper-token', { credHelpers: { 'token.example': 'test' } });
    expect(await dockerConfigCredentials({ configPath: path, env })('token.example')).toEqual({ username: '<token>', password: 'identity-token' });
  });

  it('reports helper failures as UNAUTHORIZED without what the helper printed', async () => {
    const path = await writeConfig('helper-fail', { credsStore: 'test' });
    const creds = dockerConfigCredentials({ configPath: path, env });
    const failed = await expectFailure(Promise.resolve(creds('fail.example')), 'UNAUTHORIZED');
    expect(failed.message).toContain('docker-credential-test');
    expect(failed.message).toContain('status 3');
    expectNoSecret(failed);
    expectNoSecret(await expectFailure(Promise.resolve(creds('garbage.example')), 'UNAUTHORIZED'));
    expect((await expectFailure(Promise.resolve(creds('big.example')), 'UNAUTHORIZED')).message).toContain('more than');
  });

  it('does not cache failures', async () => {
    await rm(logFile, { force: true });
    const path = await writeConfig('helper-retry', { credsStore: 'test' });
    const creds = dockerConfigCredentials({ configPath: path, env });
    await expectFailure(Promise.resolve(creds('fail.example')), 'UNAUTHORIZED');
    await expectFailure(Promise.resolve(creds('fail.example')), 'UNAUTHORIZED');
    expect(await helperCalls()).toEqual(['fail.example', 'fail.example']);
  });

  it('kills a helper that does not answer in time', async () => {
    // The helper sleeps far past the test's own timeout: only the kill lets this test end.
    const e = await expectFailure(runCredentialHelper('test', 'slow.example', { env, timeoutMs: 300 }), 'UNAUTHORIZED');
    expect(e.message).toContain('did not answer');
  });

  it('fails clearly when the helper is not installed, and finds helpers in helperDirs', async () => {
    const path = await writeConfig('helper-missing', { credsStore: 'desktop' });
    const e = await expectFailure(Promise.resolve(dockerConfigCredentials({ configPath: path, env })('ghcr.io')), 'UNAUTHORIZED');
    expect(e.message).toContain('docker-credential-desktop not found');

    const viaDirs = await writeConfig('helper-dirs', { credsStore: 'test' });
    const creds = dockerConfigCredentials({ configPath: viaDirs, env: { HELPER_LOG: logFile, PATH: '/usr/bin:/bin' }, helperDirs: [helperDir] });
    expect(await creds('ghcr.io')).toEqual({ username: 'helper-user', password: 'helper-secret' });
  });

  it('refuses helper names that are paths', async () => {
    await expectFailure(runCredentialHelper('../../bin/sh', 'ghcr.io', { env }), 'INVALID_ARGUMENT');
  });
});
