// @fastpull/core/registry: the distribution client. Endpoints and mirrors (hosts.toml), auth and
// Docker credentials, manifest resolution, ranged blob fetch and the process-wide request scheduler,
// and the manifest parsing and media types they work with.
export { RegistryClient, type RegistryClientOptions } from './client.js';
export { RegistryConnections, type RegistryConnectionsOptions } from './shared.js';
export { MANIFEST_SIZE_LIMIT, CONFIG_SIZE_LIMIT, DEFAULT_CONNECTIONS_PER_HOST } from './defaults.js';
export type { RequestOptions } from './transport.js';
export type { RegistryResponse, ResponseBody, DirectBody } from './message.js';
export type { ResolvedImage } from './resolver.js';
export type { Referrer } from './referrers.js';
export { findSociZtocs, SOCI_IMAGE_MANIFEST_ANNOTATION, type SociZtocs } from './soci.js';
export { fetchBlob, DEFAULT_CHUNK_SIZE, type RangeRequest } from './fetch.js';
export type { FetchOptions, RandomAccessSink } from './fetch-context.js';
export { DEFAULT_ORDER_LEAD } from './range-order.js';
export { DEFAULT_STRAGGLER_FLOOR, DEFAULT_STRAGGLER_WINDOW_MS } from './range-watchdog.js';
export {
  FetchScheduler,
  sharedFetchScheduler,
  DEFAULT_MAX_REQUESTS,
  DEFAULT_MAX_PER_HOST,
  DEFAULT_MAX_BYTES,
  type FetchSchedulerOptions,
} from './scheduler.js';
export { parseChallenges, type Credentials, type CredentialsProvider, type Challenge } from './auth.js';
export { dockerConfigCredentials, defaultConfigPath, type DockerConfigOptions } from './dockerconfig.js';
export { loadHostsConfig, parseHostsConfig, hostsFor, type RegistryHost, type HostCapability, type HostsConfigOptions } from './hostsconfig.js';
export { registryEndpoint, isLoopbackHost, type RegistryEndpoint } from './hosts.js';
export { proxyEnvironment, type ProxySettings } from './proxy.js';
export { parseManifest, parseImageConfig, parseDescriptor, type ParsedManifest } from '../oci/manifest.js';
export {
  MediaTypes,
  MANIFEST_ACCEPT,
  isIndexMediaType,
  isManifestMediaType,
  isSchema1MediaType,
  isConfigMediaType,
  layerCompression,
  type LayerCompression,
} from '../oci/mediatypes.js';
