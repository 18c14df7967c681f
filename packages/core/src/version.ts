// The package version, in one place: the public VERSION and the registry User-Agent use it.

/**
 * The version of @fastpull/core, as in its package.json.
 * @example
 * console.log(`fastpull ${VERSION}`);
 */
export const VERSION = '0.1.0';
