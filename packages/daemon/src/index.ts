// fastpulld: the long-lived pull service (gRPC over a unix socket) and its typed client.
export { VERSION } from '@fastpull/core';
export { Daemon, prepareSocket, type DaemonOptions } from './server.js';
export { FastpullClient, dialAddress, type HealthStatus, type RemoteImage, type RemotePullOptions, type RemotePullResult } from './client.js';
export {
  CONFIG_KEYS,
  DEFAULT_CONFIG_PATH,
  DEFAULT_SHUTDOWN_TIMEOUT_MS,
  defaultSocket,
  EXIT_CONFIG,
  readConfigFile,
  resolveConfig,
  type DaemonConfig,
  type RawConfig,
} from './config.js';
export { CODE_METADATA_KEY, DETAILS_METADATA_KEY, GRPC_STATUS, fromServiceError, toStatus } from './errors.js';
export { CHECK_NAMES, HEALTH_REASON_KEY, type CheckName } from './health.js';
export { PROTO_DIR, FASTPULL_PROTO, HEALTH_PROTO, SERVICE_NAMES } from './proto.js';
