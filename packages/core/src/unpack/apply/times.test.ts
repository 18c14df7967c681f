// Tests of entry times on their own: PAX text to the nanosecond, header seconds, the atime rule, the range bound.
import { describe, expect, it } from 'vitest';
import { tarEntry } from '../tar/tar.testkit.js';
import { entryTimes, MAX_ABS_TIME, parsePaxTime } from './times.js';

const pax = (records: Record<string, string>): Map<string, Buffer> => new Map(Object.entries(records).map(([k, v]) => [k, Buffer.from(v)]));
const refuse = (time: number): never => {
  throw new Error(`out of range: ${time}`);
};

describe('parsePaxTime', () => {
  it('parses PAX times exactly, as Go does', () => {
    expect(parsePaxTime('1600000000.123456789')).toEqual({ sec: 1_600_000_000, nsec: 123_456_789 });
    expect(parsePaxTime('1600000000')).toEqual({ sec: 1_600_000_000, nsec: 0 });
    expect(parsePaxTime('1.5')).toEqual({ sec: 1, nsec: 500_000_000 });
    expect(parsePaxTime('-1.25')).toEqual({ sec: -2, nsec: 750_000_000 });
    expect(parsePaxTime('-0.5')).toEqual({ sec: -1, nsec: 500_000_000 });
    expect(parsePaxTime('-0')).toEqual({ sec: 0, nsec: 0 });
    expect(Object.is(parsePaxTime('-0')!.sec, 0)).toBe(true);
    expect(parsePaxTime('-7')).toEqual({ sec: -7, nsec: 0 });
    expect(parsePaxTime('2.0000000009')).toEqual({ sec: 2, nsec: 0 });
    expect(parsePaxTime('1e9')).toBeUndefined();
    expect(parsePaxTime('.5')).toBeUndefined();
  });
});

describe('entryTimes', () => {
  it('takes whole header seconds, atime equal to mtime when the entry gives none', () => {
    expect(entryTimes(tarEntry({ name: 'f', mtime: 1_600_000_000 }), refuse)).toEqual({
      mtime: { sec: 1_600_000_000, nsec: 0 },
      atime: { sec: 1_600_000_000, nsec: 0 },
    });
  });

  it('reads PAX text again for the nanoseconds a double loses', () => {
    // The reader's double for 1600000000.987654321 is 1600000000.9876542091...: only the text is exact.
    // eslint-disable-next-line no-loss-of-precision -- the loss is what this case is about
    const e = tarEntry({ name: 'f', mtime: 1_600_000_000.987654321, pax: pax({ mtime: '1600000000.987654321' }) });
    expect(entryTimes(e, refuse).mtime).toEqual({ sec: 1_600_000_000, nsec: 987_654_321 });
    const before1970 = tarEntry({ name: 'f', mtime: -1.25, pax: pax({ mtime: '-1.25' }) });
    expect(entryTimes(before1970, refuse).mtime).toEqual({ sec: -2, nsec: 750_000_000 });
  });

  it('rounds a fraction without PAX text to the nanosecond, never to a whole second more', () => {
    expect(entryTimes(tarEntry({ name: 'f', mtime: 5.25 }), refuse).mtime).toEqual({ sec: 5, nsec: 250_000_000 });
    expect(entryTimes(tarEntry({ name: 'f', mtime: 5.9999999999 }), refuse).mtime).toEqual({ sec: 5, nsec: 999_999_999 });
  });

  it('keeps a later atime and replaces an earlier one with mtime, as containerd does', () => {
    const later = tarEntry({ name: 'f', mtime: 100.1, atime: 100.100000001, pax: pax({ mtime: '100.1', atime: '100.100000001' }) });
    expect(entryTimes(later, refuse).atime).toEqual({ sec: 100, nsec: 100_000_001 });
    const earlier = tarEntry({ name: 'f', mtime: 100.1, atime: 50, pax: pax({ mtime: '100.1' }) });
    expect(entryTimes(earlier, refuse).atime).toEqual({ sec: 100, nsec: 100_000_000 });
  });

  it('hands a time beyond the bound, mtime or atime, to the refusal', () => {
    expect(() => entryTimes(tarEntry({ name: 'f', mtime: -MAX_ABS_TIME - 0.5 }), refuse)).toThrow(`out of range: ${-MAX_ABS_TIME - 0.5}`);
    expect(() => entryTimes(tarEntry({ name: 'f', atime: MAX_ABS_TIME * 2 }), refuse)).toThrow(`out of range: ${MAX_ABS_TIME * 2}`);
    expect(() => entryTimes(tarEntry({ name: 'f', mtime: Number.NaN }), refuse)).toThrow('out of range: NaN');
    expect(entryTimes(tarEntry({ name: 'f', mtime: MAX_ABS_TIME }), refuse).mtime).toEqual({ sec: MAX_ABS_TIME, nsec: 0 });
  });
});
