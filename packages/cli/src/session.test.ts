import { describe, expect, it } from 'vitest';
import { groupedBySession, leadsSession, needsOwnSession } from './session.js';

const shared = { autogroup: true, leader: false };

describe('needsOwnSession', () => {
  it('relaunches a background pull that shares its session where sessions split CPU time', () => {
    expect(needsOwnSession(['pull', '--background', 'app:1'], shared)).toBe(true);
    expect(needsOwnSession(['--root', 'pull', '--background'].slice(1), shared)).toBe(true);
  });

  it('leaves every other command line, a leader, and a kernel without autogroups alone', () => {
    expect(needsOwnSession(['pull', 'app:1'], shared)).toBe(false);
    expect(needsOwnSession(['images', '--background'], shared)).toBe(false);
    expect(needsOwnSession(['pull', '--background', '--help'], shared)).toBe(false);
    expect(needsOwnSession(['pull', 'app:1', '--', '--background'], shared)).toBe(false);
    expect(needsOwnSession(['pull', '--background', 'app:1'], { autogroup: true, leader: true })).toBe(false);
    expect(needsOwnSession(['pull', '--background', 'app:1'], { autogroup: false, leader: false })).toBe(false);
  });
});

describe('leadsSession', () => {
  it('reads the session after a command name that holds spaces and parentheses', () => {
    expect(leadsSession('42 (a b) c) S 1 42 42 0 -1', 42)).toBe(true);
    expect(leadsSession('42 (a b) c) S 1 42 7 0 -1', 42)).toBe(false);
  });
});

describe('groupedBySession', () => {
  it("is true for a named group and false for the empty file of init's ungrouped session", () => {
    expect(groupedBySession('/autogroup-4131 nice 0\n')).toBe(true);
    expect(groupedBySession('/autogroup-7 nice 19')).toBe(true);
    expect(groupedBySession('')).toBe(false);
    expect(groupedBySession('\n')).toBe(false);
  });
});
