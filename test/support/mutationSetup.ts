import fc from 'fast-check';

// Under mutation a property only has to fail, not explain why: skip shrinking, which would cost each killed
// mutant many more runs against the store.
fc.configureGlobal({ endOnFailure: true });
