import { describe } from 'vitest';
import { openStore } from '../../src/store/openStore.js';
import { postgresForTests, useTestDatabases } from '../support/pg.js';
import { postgresBackdoor } from './postgresBackdoor.js';
import { describeStoreContract, type StoreFactory, type StoreFixture } from './storeContract.js';

const { available } = await postgresForTests();

describe.skipIf(!available)('PostgreSQL', () => {
  const dbs = useTestDatabases();
  const factory: StoreFactory = {
    // A throwaway database per fixture; useTestDatabases drops them all when the file ends.
    async create(): Promise<StoreFixture> {
      const url = await dbs.fresh();
      return { db: url, open: (o) => openStore(url, { ...o }), backdoor: postgresBackdoor(url) };
    },
    dispose: () => Promise.resolve(),
  };
  describeStoreContract('PostgreSQL', factory);
});
