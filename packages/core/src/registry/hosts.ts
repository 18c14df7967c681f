// Where a registry name is served from: the API origin, and whether plain HTTP is allowed there.
import { FastpullError } from '../errors.js';

/** Docker Hub's name in references and the host that serves its API. */
const DOCKER_HUB = 'docker.io';
const DOCKER_HUB_API = 'registry-1.docker.io';

export interface RegistryEndpoint {
  /** The registry name as in references, e.g. `docker.io`, `127.0.0.1:5000`. */
  readonly registry: string;
  /** `https://host[:port]` or `http://host[:port]`. */
  readonly origin: string;
}

/** True for hosts that only this machine can reach: localhost, 127.0.0.0/8, ::1. */
export function isLoopbackHost(hostWithPort: string): boolean {
  let host = hostWithPort;
  if (host.startsWith('[')) host = host.slice(1, host.indexOf(']'));
  else if (host.includes(':')) host = host.slice(0, host.lastIndexOf(':'));
  host = host.toLowerCase();
  return host === 'localhost' || host === '::1' || /^127(?:\.\d{1,3}){3}$/.test(host);
}

/**
 * The API endpoint of a registry. TLS by default; plain HTTP for loopback registries (as docker
 * treats 127.0.0.0/8) or when the caller asks for it.
 */
export function registryEndpoint(registry: string, options: { plainHttp?: boolean } = {}): RegistryEndpoint {
  if (!/^[A-Za-z0-9.[\]:-]+$/.test(registry)) throw new FastpullError('INVALID_REFERENCE', `invalid registry host ${JSON.stringify(registry)}`);
  const host = registry === DOCKER_HUB ? DOCKER_HUB_API : registry;
  const scheme = options.plainHttp === true || isLoopbackHost(host) ? 'http' : 'https';
  return { registry, origin: `${scheme}://${host}` };
}
