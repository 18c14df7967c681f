// fastpulld's health check, for scripts and exec probes: exit 0 when the API socket answers
// grpc.health.v1 Check with SERVING and something accepts connections on the snapshotter socket;
// else exit 1 and say why on stderr (with the reason fastpulld gives for NOT_SERVING). It needs no HTTP port; where fastpulld has metrics_address,
// GET /readyz there checks the same for a fraction of the cost (the DaemonSet's probes do). It resolves @fastpull/daemon as Node does from where it lies: installed as
// <npm prefix>/lib/fastpull/health.mjs (deploy/Containerfile), it finds the global install.
// Usage: node health.mjs [--socket PATH] [--snapshotter-socket PATH|""] [--timeout-ms N]
import { connect } from 'node:net';
import { parseArgs } from 'node:util';
import { FastpullClient } from '@fastpull/daemon/client';

const { values } = parseArgs({
  options: {
    socket: { type: 'string', default: '/run/fastpull/fastpulld.sock' },
    'snapshotter-socket': { type: 'string', default: '/run/fastpull/snapshotter.sock' },
    'timeout-ms': { type: 'string', default: '3000' },
  },
});
const timeoutMs = Number(values['timeout-ms']);

/** Resolves once `path` accepts a connection (the snapshotter socket serves containerd's API only). */
function accepts(path) {
  return new Promise((resolve, reject) => {
    const s = connect(path);
    s.setTimeout(timeoutMs, () => s.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    s.once('connect', () => {
      s.end();
      resolve();
    });
    s.once('error', reject);
  });
}

const client = new FastpullClient(values.socket, { ownConnection: true });
try {
  const { status, reason } = await client.healthCheck('', AbortSignal.timeout(timeoutMs));
  if (status !== 'SERVING') throw new Error(`${values.socket}: health is ${status}${reason ? `: ${reason}` : ''}`);
  if (values['snapshotter-socket'])
    await accepts(values['snapshotter-socket']).catch((e) => Promise.reject(new Error(`${values['snapshotter-socket']}: ${e.message}`)));
} catch (e) {
  process.stderr.write(`fastpulld is not healthy: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exitCode = 1;
} finally {
  client.close();
}
