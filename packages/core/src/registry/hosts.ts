// Where a registry name is served from: the API origin, and whether plain HTTP is allowed there.
import { FastpullError } from '../errors.js';

/** Docker Hub's name in references and the host that serves its API. */
const DOCKER_HUB = 'docker.io';
const DOCKER_HUB_API = 'registry-1.docker.io';

/** Where a registry's API is served. */
export interface RegistryEndpoint {
  /** The registry name as in references, e.g. `docker.io`, `127.0.0.1:5000`. */
  readonly registry: string;
  /** `https://host[:port]` or `http://host[:port]`. */
  readonly origin: string;
}

/**
 * True for hosts that only this machine can reach: localhost, 127.0.0.0/8, ::1.
 * @param hostWithPort - a host as in references, with an optional port.
 * @example
 * isLoopbackHost('127.0.0.1:5000') // true
 * isLoopbackHost('[::1]:5000') // true
 */
export function isLoopbackHost(hostWithPort: string): boolean {
  let host = hostWithPort;
  if (host.startsWith('[')) host = host.slice(1, host.indexOf(']'));
  else if (host.includes(':')) host = host.slice(0, host.lastIndexOf(':'));
  host = host.toLowerCase();
  return host === 'localhost' || host === '::1' || /^127(?:\.\d{1,3}){3}$/.test(host);
}

/**
 * The API endpoint of a registry. TLS by default; plain HTTP for loopback registries (as docker
 * treats 127.0.0.0/8) or when the caller asks for it. Docker Hub is served by
 * `registry-1.docker.io`. Throws INVALID_REFERENCE for a name with characters a host cannot have.
 * @example
 * registryEndpoint('docker.io').origin // 'https://registry-1.docker.io'
 * registryEndpoint('localhost:5000').origin // 'http://localhost:5000'
 */
export function registryEndpoint(registry: string, options: { plainHttp?: boolean } = {}): RegistryEndpoint {
  if (!/^[A-Za-z0-9.[\]:-]+$/.test(registry)) throw new FastpullError('INVALID_REFERENCE', `invalid registry host ${JSON.stringify(registry)}`);
  const host = registry === DOCKER_HUB ? DOCKER_HUB_API : registry;
  const scheme = options.plainHttp === true || isLoopbackHost(host) ? 'http' : 'https';
  return { registry, origin: `${scheme}://${host}` };
}
