/**
 * Child process that holds a ledger's write lock, as another process's long transaction would: BEGIN
 * IMMEDIATE, print "locked", and ROLLBACK when a line arrives on stdin, then exit. Args: dbPath
 */
import Database from 'better-sqlite3';

const [dbPath] = process.argv.slice(2);
const db = new Database(dbPath!, { fileMustExist: true });
db.exec('BEGIN IMMEDIATE');
process.stdout.write('locked\n');
process.stdin.once('data', () => {
  db.exec('ROLLBACK');
  db.close();
  process.exit(0);
});
