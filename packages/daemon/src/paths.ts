// Where fastpulld listens by default: light enough for the CLI to import without loading gRPC.
import { join } from 'node:path';
import { defaultRoot } from '@fastpull/core';

/**
 * containerd keeps its socket in /run/containerd; fastpulld beside it as root, else in the user's
 * runtime dir, else beside the user's store.
 */
export function defaultSocket(env: NodeJS.ProcessEnv = process.env): string {
  if (process.getuid?.() === 0) return '/run/fastpull/fastpulld.sock';
  if (env.XDG_RUNTIME_DIR) return join(env.XDG_RUNTIME_DIR, 'fastpull', 'fastpulld.sock');
  return join(defaultRoot(env), 'fastpulld.sock');
}

/** Where containerd finds fastpulld's snapshotter API (`[proxy_plugins.fastpull] address`) by default. */
export const DEFAULT_SNAPSHOTTER_SOCKET = '/run/fastpull/snapshotter.sock';

/** containerd's own gRPC socket as its packages install it (`[grpc] address`). */
export const DEFAULT_CONTAINERD_SOCKET = '/run/containerd/containerd.sock';

/**
 * The loopback port the configurations in deploy/ give `metrics_address` (metrics and the probes;
 * nothing listens unless told to). Chosen where a node's host network is not known to use it:
 * outside Prometheus' exporter range (9100-9999; 9464 is OpenTelemetry's exporter), Kubernetes'
 * node components (10248-10260) and NodePorts (30000-32767), and below Linux's ephemeral ports
 * (from 32768), which any outgoing connection may be holding when fastpulld starts.
 */
export const SUGGESTED_METRICS_PORT = 10271;
