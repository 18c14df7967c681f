// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.


/**
 * Credentials for the registry of the reference being pulled (sent to that host only).
 */
export interface Credentials {
  /**
   * User name.
   */
  'username'?: (string);
  /**
   * Password or token. Never logged.
   */
  'password'?: (string);
}

/**
 * Credentials for the registry of the reference being pulled (sent to that host only).
 */
export interface Credentials__Output {
  /**
   * User name.
   */
  'username': (string);
  /**
   * Password or token. Never logged.
   */
  'password': (string);
}
