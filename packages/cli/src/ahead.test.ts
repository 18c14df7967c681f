import { describe, expect, it } from 'vitest';
import { startsWorkerAhead } from './ahead.js';

describe('startsWorkerAhead', () => {
  it('starts one for a pull that unpacks in this process, whatever global options come first', () => {
    expect(startsWorkerAhead(['pull', 'app:1'], {})).toBe(true);
    expect(startsWorkerAhead(['--debug', 'pull', '--plain-http', '--root', '/tmp/s', '127.0.0.1:5000/app:1'], {})).toBe(true);
  });

  it('starts none for other commands, a pull through fastpulld, or a pull that prints its help', () => {
    expect(startsWorkerAhead([], {})).toBe(false);
    expect(startsWorkerAhead(['images'], {})).toBe(false);
    expect(startsWorkerAhead(['--version'], {})).toBe(false);
    expect(startsWorkerAhead(['mounts', 'pull'], {})).toBe(false);
    expect(startsWorkerAhead(['pull', '--address', '/run/fastpull.sock', 'app:1'], {})).toBe(false);
    expect(startsWorkerAhead(['pull', '--address=/run/fastpull.sock', 'app:1'], {})).toBe(false);
    expect(startsWorkerAhead(['pull', 'app:1'], { FASTPULL_ADDRESS: '/run/fastpull.sock' })).toBe(false);
    expect(startsWorkerAhead(['pull', '--help'], {})).toBe(false);
    expect(startsWorkerAhead(['pull', '-h'], {})).toBe(false);
  });
});
