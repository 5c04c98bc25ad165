export { startSimulator, parseTransfer, DEFAULT_INITIAL_BALANCE } from './server.js';
export type { Simulator, SimulatorOptions } from './server.js';
export { DEFAULT_FAULTS, decodeFaultsPatch } from './faults.js';
export type { Faults, FaultMode } from './faults.js';
export { accountExists } from './store.js';
export type { SimulatorStats, GuidStats, JournalEntry } from './store.js';
