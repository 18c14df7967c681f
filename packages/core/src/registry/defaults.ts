// The registry client's defaults and limits, each with the reason for its value.
import { VERSION } from '../version.js';

/** Manifests and indexes larger than this are refused (containerd uses the same 4 MiB cap). */
export const MANIFEST_SIZE_LIMIT = 4 * 1024 * 1024;
/** Image configs larger than this are refused: real ones are kilobytes, this leaves room for long histories. */
export const CONFIG_SIZE_LIMIT = 16 * 1024 * 1024;
/** Error bodies are read only this far: enough for the distribution error JSON. */
export const ERROR_BODY_CAP = 64 * 1024;
/** Redirects followed for one request: a registry sends one (to blob storage); more is a loop. */
export const MAX_REDIRECTS = 5;
/** Attempts for manifest and config reads (each retried whole, unlike ranges). */
export const DEFAULT_ATTEMPTS = 4;
/** Connections per registry origin. 16 parallel 16 MiB ranges reached 589 MB/s on loopback (docs/architecture.md, figures). */
export const DEFAULT_CONNECTIONS_PER_HOST = 16;
/** What the client says it is, unless told otherwise. */
export const DEFAULT_USER_AGENT = `fastpull/${VERSION}`;
/** How long a host that straggled stays behind the others. */
export const DEMOTION_MS = 60_000;
/** undici waits 300 s by default; a registry that sends nothing for 30 s is not coming back. */
export const DEFAULT_IDLE_TIMEOUT_MS = 30_000;
/** Idle connections are kept this long for the next request (a pull issues its requests in bursts). */
export const KEEP_ALIVE_TIMEOUT_MS = 10_000;
