// Where a pull's credentials come from, the same for every front end: Docker's config.json (with a
// failing helper meaning anonymous, warned once), and credentials a caller gives for the registry of
// the reference it pulls, sent to that host and no other.
import { createHash } from 'node:crypto';
import { dockerConfigCredentials } from '../registry/dockerconfig.js';
import type { Credentials, CredentialsProvider } from '../registry/auth.js';

/**
 * Docker's config.json credentials (`auths`, `credsStore`, `credHelpers`), as `docker pull` finds
 * them. As the Docker CLI does, a credential helper that fails does not stop a pull: it goes on
 * anonymously after one `warn` per registry (the message never holds a secret).
 * @example
 * const credentials = dockerCredentialsWithWarning(process.env, (registry, message) => console.warn(registry, message));
 */
export function dockerCredentialsWithWarning(env: NodeJS.ProcessEnv, warn: (registry: string, message: string) => void): CredentialsProvider {
  const provider = dockerConfigCredentials({ env });
  const warned = new Set<string>();
  return async (registry) => {
    try {
      return await provider(registry);
    } catch (e) {
      if (!warned.has(registry)) {
        warned.add(registry);
        warn(registry, e instanceof Error ? e.message : String(e));
      }
      return undefined;
    }
  };
}

/**
 * `given` for the `registries` named (the references' own hosts), `fallback` for every other host: a
 * mirror is asked about under its own name, so it never receives them.
 * @example
 * const credentials = scopedCredentials({ username: 'ci', password: token }, ['registry.example'], () => undefined);
 */
export function scopedCredentials(given: Credentials, registries: Iterable<string>, fallback: CredentialsProvider): CredentialsProvider {
  const hosts = new Set(registries);
  return (registry) => (hosts.has(registry) ? given : fallback(registry));
}

/**
 * What tells two callers' credentials apart without keeping the secret: "" for none given (the
 * service's own sources apply), else a SHA-256 of the user and password. Callers share a pull only
 * when this matches, so nobody rides on credentials that are not theirs.
 * @example credentialsIdentity(undefined) // ''
 */
export function credentialsIdentity(given: Credentials | undefined): string {
  if (!given) return '';
  return createHash('sha256')
    .update(JSON.stringify([given.username, given.password]))
    .digest('hex');
}
