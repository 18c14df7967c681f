// Image references as docker and containerd normalise them:
// `ubuntu` -> `docker.io/library/ubuntu:latest`; `host:5000/a/b:tag@sha256:...`.
import { FastpullError } from '../errors.js';
import { parseDigest, type Digest } from './digest.js';

/** The registry of a reference that names none: Docker Hub. */
export const DEFAULT_REGISTRY = 'docker.io';
/** The tag of a reference that names neither a tag nor a digest. */
export const DEFAULT_TAG = 'latest';

/** A normalised image reference. At least one of `tag` and `digest` is set. */
export interface Reference {
  /** Registry host with optional port, e.g. `docker.io`, `127.0.0.1:5000`, `[::1]:5000`. */
  readonly registry: string;
  /** Repository path, e.g. `library/ubuntu`. */
  readonly repository: string;
  /** The tag, e.g. `24.04`; `latest` when the input named neither tag nor digest. */
  readonly tag?: string;
  /** When set, the manifest is fetched by this digest and the tag is informational. */
  readonly digest?: Digest;
}

const COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
const TAG = /^[\w][\w.-]{0,127}$/;
const DOMAIN_LABEL = /^(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])$/;
const PORT = /^[0-9]{1,5}$/;
const MAX_NAME = 255;

function invalid(input: string, why: string): FastpullError {
  return new FastpullError('INVALID_REFERENCE', `invalid reference ${JSON.stringify(input.slice(0, 300))}: ${why}`);
}

function isDomain(part: string): boolean {
  return part.includes('.') || part.includes(':') || part === 'localhost' || part !== part.toLowerCase();
}

function validateDomain(input: string, domain: string): void {
  let host = domain;
  let port: string | undefined;
  if (domain.startsWith('[')) {
    const end = domain.indexOf(']');
    if (end < 0) throw invalid(input, 'unterminated IPv6 address');
    host = domain.slice(1, end);
    if (!/^[0-9a-fA-F:.]+$/.test(host) || !host.includes(':')) throw invalid(input, `bad IPv6 address ${JSON.stringify(host)}`);
    const rest = domain.slice(end + 1);
    if (rest !== '') {
      if (!rest.startsWith(':')) throw invalid(input, `bad registry ${JSON.stringify(domain)}`);
      port = rest.slice(1);
    }
  } else {
    const colon = domain.lastIndexOf(':');
    if (colon >= 0) {
      host = domain.slice(0, colon);
      port = domain.slice(colon + 1);
    }
    if (host === '' || !host.split('.').every((l) => DOMAIN_LABEL.test(l))) {
      throw invalid(input, `bad registry host ${JSON.stringify(host)}`);
    }
  }
  if (port !== undefined && (!PORT.test(port) || Number(port) > 65535 || Number(port) === 0)) {
    throw invalid(input, `bad registry port ${JSON.stringify(port)}`);
  }
}

/**
 * Parses and normalises an image reference the way docker and containerd do: Docker Hub is the
 * default registry, `library/` is its default namespace, and `latest` the default tag. Throws
 * INVALID_REFERENCE for anything else than a valid reference.
 * @example
 * parseReference('ubuntu') // { registry: 'docker.io', repository: 'library/ubuntu', tag: 'latest' }
 * parseReference('localhost:5000/app@sha256:...') // digest set, no tag
 */
export function parseReference(input: string): Reference {
  if (typeof input !== 'string' || input.length === 0) throw invalid(String(input), 'empty');
  if (input.length > 4096) throw invalid(input, 'too long');
  if (/\s/.test(input)) throw invalid(input, 'contains whitespace');

  let rest = input;
  let digest: Digest | undefined;
  const at = rest.indexOf('@');
  if (at >= 0) {
    try {
      digest = parseDigest(rest.slice(at + 1)).digest;
    } catch (e) {
      throw invalid(input, (e as Error).message);
    }
    rest = rest.slice(0, at);
  }

  let tag: string | undefined;
  const lastSlash = rest.lastIndexOf('/');
  const lastColon = rest.lastIndexOf(':');
  if (lastColon > lastSlash) {
    tag = rest.slice(lastColon + 1);
    rest = rest.slice(0, lastColon);
    if (!TAG.test(tag)) throw invalid(input, `bad tag ${JSON.stringify(tag)}`);
  }

  const parts = rest.split('/');
  let registry = DEFAULT_REGISTRY;
  if (parts.length > 1 && isDomain(parts[0]!)) {
    registry = parts.shift()!;
    validateDomain(input, registry);
  }
  if (registry === 'index.docker.io' || registry === 'registry-1.docker.io') registry = DEFAULT_REGISTRY;
  if (registry === DEFAULT_REGISTRY && parts.length === 1) parts.unshift('library');

  for (const p of parts) {
    if (!COMPONENT.test(p)) throw invalid(input, `bad repository component ${JSON.stringify(p)} (lowercase letters, digits and separators only)`);
  }
  const repository = parts.join('/');
  if (registry.length + 1 + repository.length > MAX_NAME) throw invalid(input, `name longer than ${MAX_NAME} characters`);

  if (tag === undefined && digest === undefined) tag = DEFAULT_TAG;
  return { registry, repository, ...(tag !== undefined ? { tag } : {}), ...(digest !== undefined ? { digest } : {}) };
}

/**
 * The name of a reference without tag or digest: `registry/repository`.
 * @example
 * referenceName(parseReference('ubuntu:24.04')) // 'docker.io/library/ubuntu'
 */
export function referenceName(ref: Reference): string {
  return `${ref.registry}/${ref.repository}`;
}

/**
 * The canonical string of a reference, `registry/repository[:tag][@digest]`: the name fastpull
 * records images under.
 * @example
 * formatReference(parseReference('ubuntu')) // 'docker.io/library/ubuntu:latest'
 */
export function formatReference(ref: Reference): string {
  return `${referenceName(ref)}${ref.tag !== undefined ? `:${ref.tag}` : ''}${ref.digest !== undefined ? `@${ref.digest}` : ''}`;
}
