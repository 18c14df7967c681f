// The distribution client: endpoints, auth, manifest resolution and ranged blob fetch.
export * from './hosts.js';
export { parseChallenges, type Credentials, type CredentialsProvider, type Challenge } from './auth.js';
export {
  RegistryClient,
  MANIFEST_SIZE_LIMIT,
  CONFIG_SIZE_LIMIT,
  DEFAULT_CONNECTIONS_PER_HOST,
  type RegistryClientOptions,
  type ResolvedImage,
  type RequestOptions,
} from './client.js';
export { fetchBlob, DEFAULT_CHUNK_SIZE, DEFAULT_MAX_REQUESTS, type FetchOptions, type RandomAccessSink } from './fetch.js';
export { dockerConfigCredentials, defaultConfigPath, type DockerConfigOptions } from './dockerconfig.js';
export { loadHostsConfig, parseHostsConfig, hostsFor, type RegistryHost, type HostCapability, type HostsConfigOptions } from './hostsconfig.js';
