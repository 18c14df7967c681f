// The settings of the peers configured for the fastest pull of large images, as their own
// documentation recommends (bench/README.md says which and why): containerd 2.2's transfer service
// with chunked fetch and parallel unpack, and the SOCI snapshotter in parallel pull-and-unpack mode.
// Each key here exists in the pinned release's config structs (containerd v2.2.10
// plugins/transfer/plugin.go; soci-snapshotter v0.16.1 config/pull_modes.go and config/fs.go).
import { which } from './measure.js';

/**
 * containerd 2.2's transfer service (`[plugins.'io.containerd.transfer.v1.local']`), which CRI and
 * `ctr images pull` use from 2.1 on. A fetch buffer above 512 bytes turns on the chunked fetch of
 * one layer in ranges of that size; `max_concurrent_downloads` bounds the ranges and layers in
 * flight together; `max_concurrent_unpacks` above 1 unpacks layers in parallel where the
 * snapshotter has the `rebase` capability (overlayfs does).
 */
export const CONTAINERD_TUNED = {
  max_concurrent_downloads: 10,
  concurrent_layer_fetch_buffer: 16 * 1024 * 1024,
  max_concurrent_unpacks: 10,
} as const;

/** The SOCI snapshotter's parallel pull-and-unpack mode (`[pull_modes.parallel_pull_unpack]`). */
export const SOCI_PARALLEL = {
  enable: true,
  max_concurrent_downloads: 50,
  max_concurrent_downloads_per_image: 10,
  concurrent_download_chunk_size: '16mb',
  max_concurrent_unpacks: 20,
  max_concurrent_unpacks_per_image: 10,
  discard_unpacked_layers: true,
} as const;

const q = (s: string) => JSON.stringify(s);
const value = (v: string | number | boolean) => (typeof v === 'string' ? q(v) : String(v));

/** The transfer service's table with the tuned settings, for a version 3 config. */
export function containerdTunedToml(): string[] {
  return ["[plugins.'io.containerd.transfer.v1.local']", ...Object.entries(CONTAINERD_TUNED).map(([k, v]) => `  ${k} = ${value(v)}`)];
}

/**
 * The SOCI snapshotter's config.toml: parallel mode only (no lazy loading, so no index lookups),
 * containerd's content store at `containerdSocket` (the documented setup; with
 * discard_unpacked_layers the layers are not kept there), gzip through unpigz where installed.
 */
export function sociConfig(containerdSocket: string): string {
  const unpigz = which('unpigz');
  return [
    '[content_store]',
    '  type = "containerd"',
    `  containerd_address = ${q(containerdSocket)}`,
    '[pull_modes.soci_v1]',
    '  enable = false',
    '[pull_modes.soci_v2]',
    '  enable = false',
    '[pull_modes.parallel_pull_unpack]',
    ...Object.entries(SOCI_PARALLEL).map(([k, v]) => `  ${k} = ${value(v)}`),
    ...(unpigz ? ['[pull_modes.parallel_pull_unpack.decompress_streams."gzip"]', `  path = ${q(unpigz)}`, '  args = ["-d", "-c"]'] : []),
    '',
  ].join('\n');
}
