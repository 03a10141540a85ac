/**
 * Tessera's layers as rules (docs/design.md, "Layers"), checked by `npm run lint`: what each folder may import.
 * Lower layers never import higher ones; the token path never imports the management layer; the faces (HTTP,
 * CLI, console) never reach into the store's implementation, only its interfaces (store/types.ts).
 *
 *   domain                      pure: the token service, client authentication, validation (no I/O)
 *   config                      settings
 *   store, read-model, keys, limits, audit, metrics, clock, outage, logger
 *                               infrastructure behind interfaces (read-model: what the token path reads
 *                               from memory, kept by the store's change feed)
 *   management                  every operator operation and rule
 *   http, cli                   the faces
 *   runtime, main, cluster      wiring, start and shutdown
 *   console                     the browser's pages: only their own files
 *
 * @type {import('dependency-cruiser').IConfiguration}
 */
const INFRA = 'src/(store|read-model|keys|limits|audit|metrics|clock\\.ts|outage\\.ts|logger\\.ts)';
const FACES = 'src/(http|cli|console)/';
const WIRING = 'src/(runtime/|main\\.ts|cluster\\.ts|cluster-listeners\\.ts)';

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'a circle of imports: move the shared type or function down a layer',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'domain-is-pure',
      severity: 'error',
      comment:
        'the domain imports nothing of the project but itself, and no I/O library: jose, and pkijs and asn1js to read X.509 certificates (RFC 8705)',
      from: { path: '^src/domain/' },
      to: { pathNot: ['^src/domain/', '^node_modules/(jose|pkijs|asn1js)/'], dependencyTypesNot: ['core'] },
    },
    {
      name: 'domain-no-io-core',
      severity: 'error',
      comment:
        'the domain does no I/O: no file system, network or process access (node:net for isIP and BlockList only)',
      from: { path: '^src/domain/' },
      to: { dependencyTypes: ['core'], pathNot: ['^(node:)?(crypto|util|buffer|net)$'] },
    },
    {
      name: 'config-is-low',
      severity: 'error',
      comment: 'settings import nothing above the domain',
      from: { path: '^src/config/' },
      to: { path: '^src/', pathNot: ['^src/(config|domain)/'] },
    },
    {
      name: 'infrastructure-not-up',
      severity: 'error',
      comment:
        'the store, keys, limits, audit and metrics know nothing of management, the faces or the wiring',
      from: { path: `^${INFRA}` },
      to: { path: [`^src/management/`, `^${FACES}`, `^${WIRING}`] },
    },
    {
      name: 'token-path-not-management',
      severity: 'error',
      comment:
        'the token path (domain, store, keys, limits, audit, the token route) never imports management',
      from: { path: ['^src/domain/', `^${INFRA}`, '^src/http/routes/'] },
      to: { path: '^src/management/' },
    },
    {
      name: 'management-not-faces',
      severity: 'error',
      comment: 'the management layer is called by the faces, never the other way',
      from: { path: '^src/management/' },
      to: { path: [`^${FACES}`, `^${WIRING}`] },
    },
    {
      name: 'faces-not-store-internals',
      severity: 'error',
      comment:
        "a face goes through management (or the runtime), never into the store's implementation: its interfaces " +
        "(types.ts) and the token path's read model (read-model/) are what it may name",
      from: { path: `^${FACES}` },
      to: { path: '^src/store/(kysely/|sqlite|postgres|schema|migrations)' },
    },
    {
      name: 'faces-not-each-other',
      severity: 'error',
      comment: 'the HTTP faces and the CLI do not import each other, nor the wiring',
      from: { path: '^src/http/' },
      to: { path: ['^src/cli/', `^${WIRING}`] },
    },
    {
      name: 'console-is-its-own',
      severity: 'error',
      comment:
        "the console's pages run in the browser: only their own files, and the federation presets (pure data the CLI fills from too)",
      from: { path: '^src/console/' },
      to: { path: '^src/', pathNot: ['^src/console/', '^src/management/federation-presets\\.ts$'] },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'node', 'default'] },
    exclude: { path: '^src/console/vite\\.config\\.ts$' },
  },
};
