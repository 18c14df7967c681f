// docs/containerd.md as the tests read it: its command lines, to run as written, and the messages
// it quotes, to compare with what containerd says.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { releasePath, type PrivateContainerd } from './containerd.js';
import { repoRoot } from './helpers.js';

/** docs/containerd.md. */
export const guide = readFileSync(join(repoRoot, 'docs', 'containerd.md'), 'utf8');

/** The one line of the guide's `sh` blocks that contains `needle`. */
export function guideLine(needle: string): string {
  const lines = [...guide.matchAll(/```sh\n([\s\S]*?)```/g)].flatMap((m) => m[1]!.split('\n')).filter((l) => l.includes(needle));
  if (lines.length !== 1) throw new Error(`docs/containerd.md: ${lines.length} command lines contain ${JSON.stringify(needle)}`);
  return lines[0]!;
}

/** The guide's one inline-code text that starts with `start`. */
export function guideQuote(start: string): string {
  const found = [...guide.matchAll(/`([^`\n]+)`/g)].map((m) => m[1]!).filter((q) => q.startsWith(start));
  if (found.length !== 1) throw new Error(`docs/containerd.md: ${found.length} quotes start with ${JSON.stringify(start)}`);
  return found[0]!;
}

export const escapeRegExp = (t: string): string => t.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * Runs a command line of the guide with sh, its `ctr` the one of `containerd`'s release, reaching
 * `containerd` (ctr reads CONTAINERD_ADDRESS) in the namespace the line names or ctr's default, so
 * that the line runs exactly as written. `env` adds to the environment.
 */
export function shell(
  line: string,
  containerd: PrivateContainerd,
  env: NodeJS.ProcessEnv = {},
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const childEnv: NodeJS.ProcessEnv = { ...process.env, PATH: releasePath(containerd.release), CONTAINERD_ADDRESS: containerd.address, ...env };
    delete childEnv.CONTAINERD_NAMESPACE;
    const child = spawn('sh', ['-c', line], { stdio: ['ignore', 'pipe', 'pipe'], env: childEnv });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

/**
 * What ctr said last on stderr: its own error line. ctr of 2.2 warns first on hosts with cgroup v1
 * (a deprecation notice), which is not the command's answer.
 */
export const lastLine = (stderr: string): string => stderr.trim().split('\n').at(-1) ?? '';

/** stderr without the deprecation notices that ctr of 2.2 prints on hosts with cgroup v1 (see {@link lastLine}). */
export const withoutNotices = (stderr: string): string =>
  stderr
    .split('\n')
    .filter((l) => !/^time="[^"]*" level=warning msg="DEPRECATION: /.test(l))
    .join('\n');
