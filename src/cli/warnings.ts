import { DEFAULTS } from '../shared/defaults.js';
import { formatDuration } from '../shared/duration.js';
import { err } from './output.js';

/** A setting the command line takes below its floor, with a warning: the floor, and what may go wrong under it. */
interface Floor {
  readonly flag: string;
  readonly floorMs: number;
  readonly risk: string;
}

const FLOORS = {
  retention: { flag: 'retention', floorMs: 86_400_000, risk: 'channels may still resend within it, and a resend after the purge gets E905 instead of the answer' },
  minAge: {
    flag: 'min-age',
    floorMs: DEFAULTS.minAgeMs,
    risk: 'an inquiry made before the account system shows a transfer says absent, and the transfer may then be sent twice (the min-age trap): lower it only for an account system whose inquiry sees a transfer as soon as it is applied',
  },
} as const satisfies Record<string, Floor>;

/** `guidgate purge: warning: retention 1h is under 1d; …` on stderr when `ms` is under the setting's floor. */
export function warnUnderFloor(command: string, setting: keyof typeof FLOORS, ms: number): void {
  const floor: Floor = FLOORS[setting];
  if (ms < floor.floorMs) err(`guidgate ${command}: warning: ${floor.flag} ${formatDuration(ms)} is under ${formatDuration(floor.floorMs)}; ${floor.risk}`);
}
