// The HTTP client, loaded when the first registry client is made rather than when the library is.
import { createRequire } from 'node:module';

type Undici = typeof import('undici');

let loaded: Undici | undefined;

/**
 * undici, required on first use. Loading it is most of what importing this library costs: 0.14-0.17 s
 * and 21 MiB of a process's RSS (a bare node: 0.06 s, 40 MiB), paid by every command that never
 * talks to a registry (`fastpull mounts`, `images`, `version`, a pull through fastpulld) and by
 * fastpulld until its first pull. It is CommonJS, so a synchronous require serves the constructors
 * and calls that need it, and an ES import of it elsewhere (tests) gets the same module.
 */
export function undici(): Undici {
  return (loaded ??= createRequire(import.meta.url)('undici') as Undici);
}
