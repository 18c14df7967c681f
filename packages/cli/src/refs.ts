// References as the CLI names them in messages.
import { formatReference, parseReference } from '@fastpull/core';

/** `ubuntu` -> `docker.io/library/ubuntu:latest`; a reference that does not parse stays as written. */
export function canonicalName(ref: string): string {
  try {
    return formatReference(parseReference(ref));
  } catch {
    return ref;
  }
}
