export { type CliIo, HELP, main, VERSION } from './main.js';
export {
  CliError,
  EXIT,
  type OpenedStore,
  openStore,
  redactUrl,
  type StoreOptions,
} from './open-store.js';
