// The snapshotter socket's configuration: given, turned off, or defaulted beside the default API socket.
import { describe, expect, it } from 'vitest';
import { DEFAULT_SNAPSHOTTER_SOCKET, defaultSocket, resolveConfig } from '../config.js';

const env = { HOME: '/home/u', XDG_RUNTIME_DIR: '/run/user/1' };

describe('snapshotter_socket', () => {
  it('takes the path given (relative to the working directory), and "" for none', () => {
    expect(resolveConfig({ snapshotter_socket: '/run/x/snap.sock' }, {}, env, '/w').snapshotterSocket).toBe('/run/x/snap.sock');
    expect(resolveConfig({}, { snapshotter_socket: 'snap.sock' }, env, '/w').snapshotterSocket).toBe('/w/snap.sock');
    expect(resolveConfig({ snapshotter_socket: '/run/x/snap.sock' }, { snapshotter_socket: '' }, env, '/w').snapshotterSocket).toBeUndefined();
    expect(() => resolveConfig({ snapshotter_socket: 3 }, {}, env, '/w')).toThrow(/snapshotter_socket 3: want a path/);
  });

  it('defaults to the standard socket only as root with the default API socket', () => {
    const root = process.getuid?.() === 0;
    expect(resolveConfig({}, {}, env, '/w').snapshotterSocket).toBe(root ? DEFAULT_SNAPSHOTTER_SOCKET : undefined);
    expect(resolveConfig({ socket: defaultSocket(env) }, {}, env, '/w').snapshotterSocket).toBe(root ? DEFAULT_SNAPSHOTTER_SOCKET : undefined);
    // A daemon on a socket of its own (a second store, a test) leaves containerd's socket alone.
    expect(resolveConfig({}, { socket: '/tmp/other.sock' }, env, '/w').snapshotterSocket).toBeUndefined();
  });
});
