/**
 * The Helm chart (deploy/helm/tessera): `helm lint` is clean and `helm template` of each documented value set
 * renders manifests that validate against the Kubernetes API schemas, with the hardening, probes, hooks and
 * secret handling the chart promises; values.schema.json refuses wrong values; README.md's table is values.yaml's.
 * Helm is the binary inside a devDependency (test/helpers/helm.ts); no cluster is needed.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parse } from 'yaml';
import { beforeAll, describe, expect, it } from 'vitest';
import { givenSecretProblem } from '../../src/domain/secrets.js';
import { parseMasterKey } from '../../src/keys/master-key.js';
import {
  CHART,
  helm,
  helmBinary,
  parseManifests,
  render,
  validateManifest,
  type Manifest,
} from '../helpers/helm.js';

const example = (name: string): string[] => ['-f', path.join(CHART, 'examples', name)];

/** The documented value sets (README "Value sets"): no values file, then each example. */
const SETS = {
  defaults: [],
  embedded: example('embedded.yaml'),
  'minimal-postgresql': example('minimal-postgresql.yaml'),
  postgresql: example('postgresql.yaml'),
} satisfies Record<string, string[]>;
type SetName = keyof typeof SETS;
const SET_NAMES = Object.keys(SETS) as SetName[];

const rendered = {} as Record<SetName, Manifest[]>;
beforeAll(() => {
  helmBinary();
  for (const name of SET_NAMES) rendered[name] = render(...SETS[name]);
});

// --- reading the manifests ---

const ids = (docs: Manifest[]): string[] => docs.map((d) => `${d.kind}/${d.metadata.name}`).sort();

function only(docs: Manifest[], kind: string, name?: string): Manifest {
  const found = docs.filter((d) => d.kind === kind && (name === undefined || d.metadata.name === name));
  expect(found.map((d) => d.metadata.name as string)).toHaveLength(1);
  return found[0]!;
}

const deployment = (set: SetName): Manifest => only(rendered[set], 'Deployment');
const server = (set: SetName): Manifest => deployment(set).spec.template.spec.containers[0];

function envOf(container: Manifest): Record<string, string> {
  return Object.fromEntries(
    (container.env as Manifest[]).filter((e) => 'value' in e).map((e) => [e.name, e.value]),
  );
}

/** The Secret and key behind a file path in a container: the mount holding it, its secret volume's item. */
function fileSource(pod: Manifest, container: Manifest, file: string): { secret: string; key: string } {
  const mount = (container.volumeMounts as Manifest[]).find((m) => file.startsWith(`${m.mountPath}/`));
  expect(mount, `a mount holding ${file}`).toBeDefined();
  expect(mount!.readOnly).toBe(true);
  expect(mount!.subPath).toBeUndefined();
  const volume = (pod.volumes as Manifest[]).find((v) => v.name === mount!.name)!;
  expect(volume.secret, `${file} is on a Secret volume`).toBeDefined();
  const item = (volume.secret.items as Manifest[]).find((i) => i.path === path.basename(file))!;
  expect(item).toBeDefined();
  return { secret: volume.secret.secretName, key: item.key };
}

/** Every object a pod spec names: Secrets, ConfigMaps, claims and its ServiceAccount. */
function references(pod: Manifest): string[] {
  const refs = new Set<string>([`ServiceAccount/${pod.serviceAccountName ?? 'default'}`]);
  for (const v of (pod.volumes ?? []) as Manifest[]) {
    if (v.secret) refs.add(`Secret/${v.secret.secretName}`);
    if (v.configMap) refs.add(`ConfigMap/${v.configMap.name}`);
    if (v.persistentVolumeClaim) refs.add(`PersistentVolumeClaim/${v.persistentVolumeClaim.claimName}`);
  }
  for (const c of pod.containers as Manifest[]) {
    for (const e of (c.env ?? []) as Manifest[]) {
      if (e.valueFrom?.secretKeyRef) refs.add(`Secret/${e.valueFrom.secretKeyRef.name}`);
      if (e.valueFrom?.configMapKeyRef) refs.add(`ConfigMap/${e.valueFrom.configMapKeyRef.name}`);
    }
    for (const from of (c.envFrom ?? []) as Manifest[]) {
      if (from.secretRef) refs.add(`Secret/${from.secretRef.name}`);
      if (from.configMapRef) refs.add(`ConfigMap/${from.configMapRef.name}`);
    }
  }
  for (const s of (pod.imagePullSecrets ?? []) as Manifest[]) refs.add(`Secret/${s.name}`);
  return [...refs].sort();
}

/** The release's objects that exist only after its pre-install hooks ran: every one that is not a hook. */
const madeAfterHooks = (docs: Manifest[]): string[] =>
  ids(docs.filter((d) => d.metadata.annotations?.['helm.sh/hook'] === undefined));

// --- the values every set shares ---

const POD_SECURITY = {
  runAsNonRoot: true,
  runAsUser: 65532,
  runAsGroup: 65532,
  fsGroup: 65532,
  fsGroupChangePolicy: 'OnRootMismatch',
  seccompProfile: { type: 'RuntimeDefault' },
};
const CONTAINER_SECURITY = {
  runAsNonRoot: true,
  runAsUser: 65532,
  runAsGroup: 65532,
  readOnlyRootFilesystem: true,
  allowPrivilegeEscalation: false,
  privileged: false,
  capabilities: { drop: ['ALL'] },
  seccompProfile: { type: 'RuntimeDefault' },
};
const PROBES = {
  startupProbe: {
    httpGet: { path: '/healthz', port: 'http' },
    periodSeconds: 2,
    timeoutSeconds: 2,
    failureThreshold: 60,
  },
  livenessProbe: {
    httpGet: { path: '/healthz', port: 'http' },
    periodSeconds: 10,
    timeoutSeconds: 2,
    failureThreshold: 3,
  },
  readinessProbe: {
    httpGet: { path: '/readyz', port: 'http' },
    periodSeconds: 5,
    timeoutSeconds: 2,
    failureThreshold: 2,
  },
};
const SECRET_SETTINGS = [
  'TESSERA_MASTER_KEY',
  'TESSERA_DATABASE_URL',
  'TESSERA_REDIS_URL',
  'TESSERA_BOOTSTRAP_ADMIN_CLIENT_SECRET',
  'OTEL_EXPORTER_OTLP_HEADERS',
];
const LABELS = {
  'helm.sh/chart': 'tessera-0.1.0',
  'app.kubernetes.io/name': 'tessera',
  'app.kubernetes.io/instance': 'tessera',
  'app.kubernetes.io/version': '0.1.0',
  'app.kubernetes.io/managed-by': 'Helm',
};
const SERVER_SELECTOR = {
  'app.kubernetes.io/name': 'tessera',
  'app.kubernetes.io/instance': 'tessera',
  'app.kubernetes.io/component': 'server',
};
const TMP = { name: 'tmp', emptyDir: { sizeLimit: '64Mi' } };
const secretVolume = (name: string, secretName: string, key: string, file: string): Manifest => ({
  name,
  secret: { secretName, defaultMode: 0o440, items: [{ key, path: file }] },
});

describe('helm lint', () => {
  for (const name of SET_NAMES) {
    it(`is clean for ${name}, also with --strict`, () => {
      for (const strict of [[], ['--strict']]) {
        const result = helm('lint', CHART, ...strict, ...SETS[name]);
        expect(result.code, result.stdout + result.stderr).toBe(0);
        // The one line besides the summary is Helm's recommendation of an icon (an INFO, not a warning).
        expect(result.stdout.split('\n').filter((line) => line !== '')).toEqual([
          `==> Linting ${CHART}`,
          '[INFO] Chart.yaml: icon is recommended',
          '1 chart(s) linted, 0 chart(s) failed',
        ]);
        expect(result.stderr).toBe('');
      }
    });
  }
});

describe('helm template', () => {
  it('renders the objects of each mode, and no other', () => {
    expect(ids(rendered.defaults)).toEqual([
      'Deployment/tessera',
      'PersistentVolumeClaim/tessera-data',
      'Secret/tessera-master-key',
      'Service/tessera',
      'ServiceAccount/tessera',
    ]);
    expect(ids(rendered.embedded)).toEqual([
      'ConfigMap/tessera-config',
      'Deployment/tessera',
      'Ingress/tessera',
      'PersistentVolumeClaim/tessera-data',
      'Secret/tessera-bootstrap-admin',
      'Secret/tessera-master-key',
      'Service/tessera',
      'ServiceAccount/tessera',
    ]);
    expect(ids(rendered['minimal-postgresql'])).toEqual([
      'Deployment/tessera',
      'Job/tessera-migrate',
      'PodDisruptionBudget/tessera',
      'Secret/tessera-master-key',
      'Service/tessera',
      'ServiceAccount/tessera',
    ]);
    // The master key is the existing Secret's: the chart makes none.
    expect(ids(rendered.postgresql)).toEqual([
      'ConfigMap/tessera-config',
      'Deployment/tessera',
      'HorizontalPodAutoscaler/tessera',
      'Ingress/tessera',
      'Job/tessera-migrate',
      'PodDisruptionBudget/tessera',
      'Secret/tessera-bootstrap-admin',
      'Service/tessera',
      'ServiceAccount/tessera',
      'ServiceMonitor/tessera',
    ]);
  });

  it('renders documents that validate against the Kubernetes API schemas', () => {
    for (const name of SET_NAMES) {
      for (const doc of rendered[name]) {
        expect(() => validateManifest(doc), `${name}: ${doc.kind}/${doc.metadata.name}`).not.toThrow();
        expect(doc.metadata.namespace, `${name}: ${doc.kind}`).toBe('auth');
        expect(doc.metadata.labels).toMatchObject(LABELS);
      }
    }
  });

  it('the schema check catches a broken manifest (it is not vacuous)', () => {
    const broken = structuredClone(deployment('defaults'));
    broken.spec.template.spec.containers[0].ports[0].containerPort = 'http';
    expect(() => validateManifest(broken)).toThrow(/containerPort must be integer/);
    const monitor = structuredClone(only(rendered.postgresql, 'ServiceMonitor'));
    monitor.spec.endpoints[0].interval = '15 seconds';
    expect(() => validateManifest(monitor)).toThrow(/interval is not a duration/);
  });
});

describe('the server pods', () => {
  it('run hardened: non-root 65532, read-only root, no privilege escalation, no capabilities, RuntimeDefault seccomp', () => {
    for (const name of SET_NAMES) {
      const pod = deployment(name).spec.template.spec;
      expect(pod.securityContext, name).toEqual(POD_SECURITY);
      expect(pod.containers).toHaveLength(1);
      expect(pod.containers[0].securityContext, name).toEqual(CONTAINER_SECURITY);
      expect(pod.automountServiceAccountToken).toBe(false);
      // A Service named tessera would otherwise set TESSERA_PORT=tcp://… in every pod of the namespace.
      expect(pod.enableServiceLinks).toBe(false);
      // The only writable paths: /data and /tmp.
      const writable = (pod.containers[0].volumeMounts as Manifest[]).filter((m) => m.readOnly !== true);
      expect(writable.map((m) => m.mountPath)).toEqual(['/data', '/tmp']);
    }
  });

  it('are probed on the http port: startup and liveness /healthz, readiness /readyz', () => {
    for (const name of SET_NAMES) {
      const container = server(name);
      expect(container.ports).toEqual([{ name: 'http', containerPort: 8080, protocol: 'TCP' }]);
      expect({
        startupProbe: container.startupProbe,
        livenessProbe: container.livenessProbe,
        readinessProbe: container.readinessProbe,
      }).toEqual(PROBES);
      expect(container.args).toEqual(['serve']);
      expect(container.command).toBeUndefined();
    }
    expect(server('defaults').image).toBe('tessera:0.1.0');
    expect(server('postgresql').image).toBe('registry.example.com/platform/tessera:0.1.0');
    expect(deployment('postgresql').spec.template.spec.imagePullSecrets).toEqual([
      { name: 'registry-credentials' },
    ]);
  });

  it('embedded: one replica, Recreate, the store on the chart’s claim (kept on uninstall)', () => {
    for (const name of ['defaults', 'embedded'] as const) {
      const spec = deployment(name).spec;
      expect(spec.replicas).toBe(1);
      expect(spec.strategy).toEqual({ type: 'Recreate' });
      expect(spec.template.spec.volumes[0]).toEqual({
        name: 'data',
        persistentVolumeClaim: { claimName: 'tessera-data' },
      });
    }
    const claim = only(rendered.defaults, 'PersistentVolumeClaim');
    expect(claim.metadata.annotations).toEqual({ 'helm.sh/resource-policy': 'keep' });
    expect(claim.spec).toEqual({
      accessModes: ['ReadWriteOnce'],
      resources: { requests: { storage: '1Gi' } },
    });
    expect(only(rendered.embedded, 'PersistentVolumeClaim').spec.resources.requests.storage).toBe('5Gi');
    for (const name of ['defaults', 'embedded'] as const) {
      expect(
        rendered[name].filter((d) =>
          ['PodDisruptionBudget', 'HorizontalPodAutoscaler', 'Job'].includes(d.kind),
        ),
      ).toEqual([]);
    }
  });

  it('postgresql: N replicas rolling (or the autoscaler’s), /data an emptyDir, a PodDisruptionBudget', () => {
    const minimal = deployment('minimal-postgresql').spec;
    expect(minimal.replicas).toBe(2);
    expect(minimal.strategy).toEqual({
      type: 'RollingUpdate',
      rollingUpdate: { maxSurge: 1, maxUnavailable: 0 },
    });
    expect(minimal.template.spec.volumes[0]).toEqual({ name: 'data', emptyDir: { sizeLimit: '2Gi' } });
    // With the autoscaler the Deployment names no replica count, which an upgrade would otherwise reset.
    expect('replicas' in deployment('postgresql').spec).toBe(false);
    expect(only(rendered.postgresql, 'HorizontalPodAutoscaler').spec).toEqual({
      scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'tessera' },
      minReplicas: 3,
      maxReplicas: 10,
      metrics: [
        {
          type: 'Resource',
          resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: 70 } },
        },
      ],
    });
    for (const name of ['minimal-postgresql', 'postgresql'] as const) {
      expect(only(rendered[name], 'PodDisruptionBudget').spec).toEqual({
        maxUnavailable: 1,
        selector: { matchLabels: SERVER_SELECTOR },
      });
    }
    expect(deployment('postgresql').spec.template.spec.topologySpreadConstraints).toEqual([
      {
        labelSelector: { matchLabels: SERVER_SELECTOR },
        maxSkew: 1,
        topologyKey: 'topology.kubernetes.io/zone',
        whenUnsatisfiable: 'ScheduleAnyway',
      },
    ]);
  });

  it('have a grace period longer than the shutdown delay and timeout', () => {
    const grace = { defaults: 40, embedded: 40, 'minimal-postgresql': 40, postgresql: 45 };
    for (const name of SET_NAMES) {
      const env = envOf(server(name));
      const drain = Number(env.TESSERA_SHUTDOWN_DELAY) + Number(env.TESSERA_SHUTDOWN_TIMEOUT);
      const period = deployment(name).spec.template.spec.terminationGracePeriodSeconds as number;
      expect(period, name).toBe(grace[name]);
      expect(period).toBeGreaterThan(drain);
    }
    expect(envOf(server('postgresql'))).toMatchObject({
      TESSERA_SHUTDOWN_DELAY: '10',
      TESSERA_SHUTDOWN_TIMEOUT: '20',
    });
    const set = render('--set', 'terminationGracePeriodSeconds=60');
    expect(only(set, 'Deployment').spec.template.spec.terminationGracePeriodSeconds).toBe(60);
  });

  it('defaults: exactly these settings, the issuer the Service’s address', () => {
    expect(server('defaults').env).toEqual([
      { name: 'NODE_ENV', value: 'production' },
      { name: 'TESSERA_DATA_DIR', value: '/data' },
      { name: 'TESSERA_LOG_LEVEL', value: 'info' },
      { name: 'TESSERA_PORT', value: '8080' },
      { name: 'TESSERA_HOST', value: '0.0.0.0' },
      { name: 'TESSERA_ISSUER', value: 'http://tessera.auth.svc:8080' },
      { name: 'TESSERA_MASTER_KEY_FILE', value: '/etc/tessera/secrets/master-key/master-key' },
      { name: 'TESSERA_TOKEN_TTL', value: '1800' },
      { name: 'TESSERA_METRICS', value: 'true' },
      { name: 'TESSERA_SHUTDOWN_DELAY', value: '5' },
      { name: 'TESSERA_SHUTDOWN_TIMEOUT', value: '20' },
      { name: 'TESSERA_OTEL_TRUST_REMOTE', value: 'false' },
    ]);
    expect(deployment('defaults').spec.template.spec.volumes).toEqual([
      { name: 'data', persistentVolumeClaim: { claimName: 'tessera-data' } },
      TMP,
      secretVolume('master-key', 'tessera-master-key', 'master-key', 'master-key'),
    ]);
  });

  it('postgresql: exactly these settings, OTel passed through, secrets as files', () => {
    expect(server('postgresql').env).toEqual([
      { name: 'NODE_ENV', value: 'production' },
      { name: 'TESSERA_DATA_DIR', value: '/data' },
      { name: 'TESSERA_LOG_LEVEL', value: 'info' },
      { name: 'TESSERA_DATABASE_URL_FILE', value: '/etc/tessera/secrets/database/url' },
      { name: 'TESSERA_PORT', value: '8080' },
      { name: 'TESSERA_HOST', value: '0.0.0.0' },
      { name: 'TESSERA_ISSUER', value: 'https://auth.example.com' },
      { name: 'TESSERA_MASTER_KEY_FILE', value: '/etc/tessera/secrets/master-key/master-key' },
      { name: 'TESSERA_REDIS_URL_FILE', value: '/etc/tessera/secrets/redis/url' },
      { name: 'TESSERA_TOKEN_TTL', value: '900' },
      { name: 'TESSERA_TRUST_PROXY', value: '10.42.0.0/16' },
      { name: 'TESSERA_METRICS', value: 'true' },
      { name: 'TESSERA_SHUTDOWN_DELAY', value: '10' },
      { name: 'TESSERA_SHUTDOWN_TIMEOUT', value: '20' },
      { name: 'TESSERA_BOOTSTRAP_ADMIN_CLIENT_ID', value: 'platform-admin' },
      {
        name: 'TESSERA_BOOTSTRAP_ADMIN_CLIENT_SECRET_FILE',
        value: '/etc/tessera/secrets/bootstrap-admin/client-secret',
      },
      { name: 'TESSERA_APPLY_FILE', value: '/etc/tessera/config/tessera.yaml' },
      { name: 'TESSERA_APPLY_PRUNE', value: 'true' },
      { name: 'OTEL_EXPORTER_OTLP_ENDPOINT', value: 'http://otel-collector.observability.svc:4318' },
      { name: 'OTEL_EXPORTER_OTLP_PROTOCOL', value: 'http/protobuf' },
      { name: 'OTEL_TRACES_SAMPLER', value: 'parentbased_traceidratio' },
      { name: 'OTEL_TRACES_SAMPLER_ARG', value: '0.01' },
      { name: 'OTEL_SERVICE_NAME', value: 'tessera' },
      {
        name: 'OTEL_RESOURCE_ATTRIBUTES',
        value: 'deployment.environment.name=production,service.namespace=auth',
      },
      { name: 'OTEL_EXPORTER_OTLP_HEADERS_FILE', value: '/etc/tessera/secrets/otel-headers/headers' },
      { name: 'TESSERA_OTEL_TRUST_REMOTE', value: 'false' },
      { name: 'TESSERA_KEEPALIVE_TIMEOUT', value: '65' },
      { name: 'TESSERA_STALE_WINDOW', value: '2m' },
    ]);
    const pod = deployment('postgresql').spec.template.spec;
    const container = server('postgresql');
    const env = envOf(container);
    expect(fileSource(pod, container, env.TESSERA_MASTER_KEY_FILE!)).toEqual({
      secret: 'tessera-master-key',
      key: 'master-key',
    });
    expect(fileSource(pod, container, env.TESSERA_DATABASE_URL_FILE!)).toEqual({
      secret: 'tessera-database',
      key: 'url',
    });
    expect(fileSource(pod, container, env.TESSERA_REDIS_URL_FILE!)).toEqual({
      secret: 'tessera-redis',
      key: 'url',
    });
    expect(fileSource(pod, container, env.OTEL_EXPORTER_OTLP_HEADERS_FILE!)).toEqual({
      secret: 'tessera-otlp',
      key: 'headers',
    });
    expect(fileSource(pod, container, env.TESSERA_BOOTSTRAP_ADMIN_CLIENT_SECRET_FILE!)).toEqual({
      secret: 'tessera-bootstrap-admin',
      key: 'client-secret',
    });
    expect(pod.volumes).toEqual([
      { name: 'data', emptyDir: { sizeLimit: '2Gi' } },
      TMP,
      secretVolume('master-key', 'tessera-master-key', 'master-key', 'master-key'),
      secretVolume('database-url', 'tessera-database', 'url', 'url'),
      secretVolume('redis-url', 'tessera-redis', 'url', 'url'),
      secretVolume('bootstrap-admin', 'tessera-bootstrap-admin', 'client-secret', 'client-secret'),
      { name: 'config', configMap: { name: 'tessera-config' } },
      { name: 'config-secrets', secret: { secretName: 'tessera-clients', defaultMode: 0o440 } },
      secretVolume('otel-headers', 'tessera-otlp', 'headers', 'headers'),
    ]);
  });

  it('never carry a secret in their environment: every secret is a file on a Secret volume', () => {
    for (const name of SET_NAMES) {
      const pods = rendered[name]
        .filter((d) => ['Deployment', 'Job'].includes(d.kind))
        .map((d) => d.spec.template.spec);
      for (const pod of pods) {
        const container = pod.containers[0] as Manifest;
        const entries = container.env as Manifest[];
        for (const entry of entries) {
          expect(SECRET_SETTINGS, `${name}: ${entry.name}`).not.toContain(entry.name);
          if (entry.name.endsWith('_FILE') && entry.name !== 'TESSERA_APPLY_FILE')
            expect(fileSource(pod, container, entry.value as string).secret).toMatch(/^tessera-/);
        }
        // Nothing comes from a Secret by reference (into the environment): every secret is a file.
        expect(
          entries.filter((e) => e.valueFrom !== undefined).map((e) => e.name),
          name,
        ).toEqual([]);
        for (const mount of container.volumeMounts as Manifest[]) expect(mount.subPath).toBeUndefined();
      }
    }
  });

  it('no value of a Secret the chart makes appears in any other object', () => {
    for (const name of SET_NAMES) {
      const secrets = rendered[name].filter((d) => d.kind === 'Secret');
      const values = secrets.flatMap((s) => Object.values(s.data as Record<string, string>));
      const decoded = values.map((v) => Buffer.from(v, 'base64').toString('utf8'));
      const others = JSON.stringify(rendered[name].filter((d) => d.kind !== 'Secret'));
      for (const value of [...values, ...decoded]) expect(others.includes(value), name).toBe(false);
      for (const configMap of rendered[name].filter((d) => d.kind === 'ConfigMap'))
        expect(JSON.stringify(configMap)).not.toMatch(/password|secret:|postgres:\/\/|redis:\/\//i);
    }
  });
});

describe('the Secrets the chart makes', () => {
  it('the master key: 32 random bytes in base64 that Tessera accepts, new at each install, kept on uninstall', () => {
    const keys = new Set<string>();
    for (const name of ['defaults', 'embedded', 'minimal-postgresql'] as const) {
      const secret = only(rendered[name], 'Secret', 'tessera-master-key');
      expect(secret.metadata.annotations).toEqual({ 'helm.sh/resource-policy': 'keep' });
      expect(secret.type).toBe('Opaque');
      expect(Object.keys(secret.data)).toEqual(['master-key']);
      const text = Buffer.from(secret.data['master-key'] as string, 'base64').toString('utf8');
      expect(text).toMatch(/^[A-Za-z0-9+/]{43}=$/);
      expect(parseMasterKey(text).key).toHaveLength(32);
      keys.add(text);
    }
    expect(keys.size).toBe(3);
  });

  it('the bootstrap admin’s secret: 48 letters and digits, kept on uninstall; none when it is an existing Secret', () => {
    for (const name of ['embedded', 'postgresql'] as const) {
      const secret = only(rendered[name], 'Secret', 'tessera-bootstrap-admin');
      expect(secret.metadata.annotations).toEqual({ 'helm.sh/resource-policy': 'keep' });
      const text = Buffer.from(secret.data['client-secret'] as string, 'base64').toString('utf8');
      expect(text).toMatch(/^[A-Za-z0-9]{48}$/);
      expect(givenSecretProblem(text)).toBeUndefined();
    }
    const existing = render(
      ...SETS.embedded,
      '--set',
      'bootstrapAdmin.existingSecret=admin,bootstrapAdmin.secretKey=s',
    );
    expect(existing.filter((d) => d.metadata.name === 'tessera-bootstrap-admin')).toEqual([]);
    const pod = only(existing, 'Deployment').spec.template.spec;
    expect(fileSource(pod, pod.containers[0], '/etc/tessera/secrets/bootstrap-admin/client-secret')).toEqual({
      secret: 'admin',
      key: 's',
    });
  });

  it('on an upgrade that cannot read them back, stop rather than render new ones', () => {
    const result = helm('template', 'tessera', CHART, '--namespace', 'auth', '--is-upgrade');
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain(
      'cannot read Secret tessera-master-key to keep the master key it holds (lookup does not reach the cluster: use --dry-run=server, or set its existingSecret)',
    );
    // With every secret an existing one there is nothing to read back.
    const upgrade = helm(
      'template',
      'tessera',
      CHART,
      '--namespace',
      'auth',
      '--is-upgrade',
      ...SETS.postgresql,
      '--set',
      'bootstrapAdmin.existingSecret=admin',
    );
    expect(upgrade.code, upgrade.stderr).toBe(0);
  });
});

describe('the migration Job', () => {
  const job = (set: SetName): Manifest => only(rendered[set], 'Job', 'tessera-migrate');

  it('runs `tessera migrate` as a pre-install,pre-upgrade hook, replaced at the next run', () => {
    for (const name of ['minimal-postgresql', 'postgresql'] as const) {
      const manifest = job(name);
      expect(manifest.metadata.annotations).toEqual({
        'helm.sh/hook': 'pre-install,pre-upgrade',
        'helm.sh/hook-weight': '5',
        'helm.sh/hook-delete-policy': 'before-hook-creation',
      });
      expect(manifest.metadata.labels['app.kubernetes.io/component']).toBe('migration');
      expect(manifest.spec.backoffLimit).toBe(2);
      expect(manifest.spec.activeDeadlineSeconds).toBe(900);
      const pod = manifest.spec.template.spec;
      expect(pod.restartPolicy).toBe('Never');
      expect(pod.securityContext).toEqual(POD_SECURITY);
      expect(pod.automountServiceAccountToken).toBe(false);
      expect(pod.enableServiceLinks).toBe(false);
      expect(pod.containers).toHaveLength(1);
      expect(pod.containers[0].args).toEqual(['migrate']);
      expect(pod.containers[0].image).toBe(server(name).image);
      expect(pod.containers[0].securityContext).toEqual(CONTAINER_SECURITY);
      expect(pod.volumes).toEqual([
        { name: 'data', emptyDir: { sizeLimit: '256Mi' } },
        TMP,
        secretVolume('database-url', 'tessera-database', 'url', 'url'),
      ]);
      // Writable: /data (the image's compile cache) and /tmp, both emptyDirs.
      const writable = (pod.containers[0].volumeMounts as Manifest[]).filter((m) => m.readOnly !== true);
      expect(writable.map((m) => m.mountPath)).toEqual(['/data', '/tmp']);
      const env = envOf(pod.containers[0]);
      expect(fileSource(pod, pod.containers[0], env.TESSERA_DATABASE_URL_FILE!)).toEqual({
        secret: 'tessera-database',
        key: 'url',
      });
    }
    expect(job('minimal-postgresql').spec.template.spec.containers[0].env).toEqual([
      { name: 'NODE_ENV', value: 'production' },
      { name: 'TESSERA_DATA_DIR', value: '/data' },
      { name: 'TESSERA_LOG_LEVEL', value: 'info' },
      { name: 'TESSERA_DATABASE_URL_FILE', value: '/etc/tessera/secrets/database/url' },
    ]);
  });

  it('uses nothing the release makes: a pre-install hook runs before any of it exists', () => {
    for (const name of ['minimal-postgresql', 'postgresql'] as const) {
      const refs = references(job(name).spec.template.spec);
      const release = madeAfterHooks(rendered[name]);
      expect(
        refs.filter((ref) => release.includes(ref)),
        name,
      ).toEqual([]);
    }
    expect(references(job('minimal-postgresql').spec.template.spec)).toEqual([
      'Secret/tessera-database',
      'ServiceAccount/default',
    ]);
    expect(references(job('postgresql').spec.template.spec)).toEqual([
      'Secret/registry-credentials',
      'Secret/tessera-database',
      'ServiceAccount/default',
    ]);
    // The check is not vacuous: the server's pods do use objects of the release (which exist when they start).
    expect(
      references(deployment('minimal-postgresql').spec.template.spec).filter((ref) =>
        madeAfterHooks(rendered['minimal-postgresql']).includes(ref),
      ),
    ).toEqual(['Secret/tessera-master-key', 'ServiceAccount/tessera']);
  });

  it('takes env but not extraEnv, and its own ServiceAccount and volumes', () => {
    const docs = render(
      ...SETS['minimal-postgresql'],
      '--set',
      'extraEnv[0].name=TESSERA_TLS_CERT,extraEnv[0].valueFrom.configMapKeyRef.name=made-by-release,extraEnv[0].valueFrom.configMapKeyRef.key=k',
      '--set',
      'store.postgresql.migration.serviceAccountName=migrator,env.TESSERA_PG_QUERY_TIMEOUT=30',
    );
    const pod = only(docs, 'Job').spec.template.spec;
    expect(pod.serviceAccountName).toBe('migrator');
    expect(envOf(pod.containers[0]).TESSERA_PG_QUERY_TIMEOUT).toBe('30');
    expect((pod.containers[0].env as Manifest[]).map((e) => e.name)).not.toContain('TESSERA_TLS_CERT');
    const serverEnv = only(docs, 'Deployment').spec.template.spec.containers[0].env as Manifest[];
    expect(serverEnv.find((e) => e.name === 'TESSERA_TLS_CERT')).toEqual({
      name: 'TESSERA_TLS_CERT',
      valueFrom: { configMapKeyRef: { name: 'made-by-release', key: 'k' } },
    });
    expect(
      render(...SETS['minimal-postgresql'], '--set', 'store.postgresql.migration.enabled=false').filter(
        (d) => d.kind === 'Job',
      ),
    ).toEqual([]);
  });
});

describe('the apply file', () => {
  it('is the `config` value as YAML in a ConfigMap mounted as a directory, which TESSERA_APPLY_FILE names', () => {
    for (const name of ['embedded', 'postgresql'] as const) {
      const values = parse(readFileSync(path.join(CHART, 'examples', `${name}.yaml`), 'utf8')) as Manifest;
      const configMap = only(rendered[name], 'ConfigMap', 'tessera-config');
      expect(Object.keys(configMap.data)).toEqual(['tessera.yaml']);
      expect(parse(configMap.data['tessera.yaml'] as string)).toEqual(values.config);
      const container = server(name);
      const mount = (container.volumeMounts as Manifest[]).find((m) => m.name === 'config');
      // A directory, not a subPath: the kubelet's ..data link swap brings an update without a restart.
      expect(mount).toEqual({ name: 'config', mountPath: '/etc/tessera/config', readOnly: true });
      expect(envOf(container).TESSERA_APPLY_FILE).toBe('/etc/tessera/config/tessera.yaml');
      // No checksum of the ConfigMap on the pods: a change must not restart them.
      expect(deployment(name).spec.template.metadata.annotations).toBeUndefined();
    }
    expect(envOf(server('embedded')).TESSERA_APPLY_PRUNE).toBe('false');
    expect(envOf(server('postgresql')).TESSERA_APPLY_PRUNE).toBe('true');
    expect(envOf(server('defaults')).TESSERA_APPLY_FILE).toBeUndefined();
    const clientSecrets = (server('postgresql').volumeMounts as Manifest[]).find(
      (m) => m.name === 'config-secrets',
    );
    expect(clientSecrets).toEqual({
      name: 'config-secrets',
      mountPath: '/etc/tessera/client-secrets',
      readOnly: true,
    });
  });
});

describe('Service, Ingress, ServiceMonitor', () => {
  it('the Service selects the server pods only', () => {
    for (const name of SET_NAMES) {
      const service = only(rendered[name], 'Service');
      expect(service.spec).toEqual({
        type: 'ClusterIP',
        selector: SERVER_SELECTOR,
        ports: [{ name: 'http', port: 8080, targetPort: 'http', protocol: 'TCP' }],
      });
      expect(deployment(name).spec.selector.matchLabels).toEqual(SERVER_SELECTOR);
      expect(deployment(name).spec.template.metadata.labels).toMatchObject(SERVER_SELECTOR);
    }
    expect(
      only(rendered.postgresql, 'Job').spec.template.metadata.labels['app.kubernetes.io/component'],
    ).toBe('migration');
  });

  it('the Ingress routes the host to the http port, with TLS; the issuer derives from it when not set', () => {
    expect(only(rendered.postgresql, 'Ingress').spec).toEqual({
      ingressClassName: 'nginx',
      tls: [{ secretName: 'tessera-tls', hosts: ['auth.example.com'] }],
      rules: [
        {
          host: 'auth.example.com',
          http: {
            paths: [
              {
                path: '/',
                pathType: 'Prefix',
                backend: { service: { name: 'tessera', port: { name: 'http' } } },
              },
            ],
          },
        },
      ],
    });
    expect(only(rendered.embedded, 'Ingress').metadata.annotations).toEqual({
      'cert-manager.io/cluster-issuer': 'letsencrypt',
    });
    const derived = (...args: string[]): string =>
      envOf(only(render(...args), 'Deployment').spec.template.spec.containers[0]).TESSERA_ISSUER!;
    expect(derived(...SETS.embedded, '--set', 'issuer=')).toBe('https://auth.example.com');
    expect(derived('--set', 'ingress.enabled=true,ingress.hosts[0].host=auth.internal')).toBe(
      'http://auth.internal',
    );
  });

  it('the ServiceMonitor scrapes /metrics on the Service’s http port', () => {
    const monitor = only(rendered.postgresql, 'ServiceMonitor');
    expect(monitor.apiVersion).toBe('monitoring.coreos.com/v1');
    expect(monitor.metadata.labels).toMatchObject({ release: 'kube-prometheus-stack' });
    expect(monitor.spec).toEqual({
      selector: { matchLabels: SERVER_SELECTOR },
      namespaceSelector: { matchNames: ['auth'] },
      endpoints: [{ port: 'http', path: '/metrics', scheme: 'http', interval: '15s', scrapeTimeout: '5s' }],
    });
    const service = only(rendered.postgresql, 'Service');
    expect(service.metadata.labels).toMatchObject(monitor.spec.selector.matchLabels);
    expect(service.spec.ports.map((p: Manifest) => p.name)).toContain(monitor.spec.endpoints[0].port);
    expect(envOf(server('postgresql')).TESSERA_METRICS).toBe('true');
  });
});

describe('values.schema.json and the chart’s checks refuse wrong values', () => {
  const refusals: [string, string[], string][] = [
    [
      'several instances on the embedded store',
      ['--set', 'replicaCount=3'],
      "at '/replicaCount': maximum: got 3, want 1",
    ],
    [
      'the autoscaler on the embedded store',
      ['--set', 'autoscaling.enabled=true'],
      "at '/autoscaling/enabled': value must be false",
    ],
    [
      'an unknown store',
      ['--set', 'store.type=mysql'],
      "at '/store/type': value must be one of 'embedded', 'postgresql'",
    ],
    ['an unknown top-level key', ['--set', 'bogus=1'], "at '': additional properties 'bogus' not allowed"],
    [
      'an unknown nested key',
      ['--set', 'ingress.host=x'],
      "at '/ingress': additional properties 'host' not allowed",
    ],
    [
      'a string for a number',
      ['--set-string', 'replicaCount=three'],
      "at '/replicaCount': got string, want integer",
    ],
    [
      'PostgreSQL without its Secret',
      ['--set', 'store.type=postgresql'],
      "at '/store/postgresql/existingSecret': minLength: got 0, want 1",
    ],
    [
      'a bad log level',
      ['--set', 'logLevel=verbose'],
      "at '/logLevel': value must be one of 'fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'",
    ],
    [
      'an issuer with a path',
      ['--set', 'issuer=https://auth.example.com/oauth'],
      "at '/issuer': 'https://auth.example.com/oauth' does not match pattern",
    ],
    ['a token lifetime under a minute', ['--set', 'tokenTtl=10'], "at '/tokenTtl': minimum: got 10, want 60"],
    ['trusting every proxy', ['--set-string', 'trustProxy[0]=true'], "at '/trustProxy/0': 'not' failed"],
    [
      'a secret setting as a plain value',
      ['--set', 'env.TESSERA_MASTER_KEY=x'],
      "invalid propertyName 'TESSERA_MASTER_KEY'",
    ],
    ['a setting the chart makes', ['--set', 'env.TESSERA_PORT=9000'], "invalid propertyName 'TESSERA_PORT'"],
    [
      'a secret setting in extraEnv',
      ['--set', 'extraEnv[0].name=TESSERA_DATABASE_URL,extraEnv[0].value=postgres://u:p@db/t'],
      "at '/extraEnv/0/name': 'not' failed",
    ],
    [
      'an apply file with an unknown key',
      ['--set', 'config.audience[0].identifier=x'],
      "at '/config': additional properties 'audience' not allowed",
    ],
    [
      'a client secret in the apply file (it would be in a ConfigMap)',
      [
        '--set',
        'config.clients[0].client_id=a,config.clients[0].client_secret=0123456789abcdef0123456789abcdef',
      ],
      "invalid propertyName 'client_secret'",
    ],
    [
      'a bad OTLP protocol',
      ['--set', 'otel.protocol=thrift'],
      "at '/otel/protocol': value must be one of '', 'http/protobuf', 'http/json', 'grpc'",
    ],
    [
      'an ingress without hosts',
      ['--set', 'ingress.enabled=true'],
      "at '/ingress/hosts': minItems: got 0, want 1",
    ],
    [
      'a ServiceMonitor without metrics',
      ['--set', 'serviceMonitor.enabled=true,metrics=false'],
      "at '/metrics': value must be true",
    ],
    ['root', ['--set', 'securityContext.runAsUser=0'], "at '/securityContext/runAsUser'"],
    [
      'a grace period the drain does not fit in',
      ['--set', 'terminationGracePeriodSeconds=25'],
      'terminationGracePeriodSeconds (25) must exceed shutdown.delay + shutdown.timeout (25)',
    ],
    [
      'a CPU target without a CPU request',
      [...SETS['minimal-postgresql'], '--set', 'autoscaling.enabled=true,resources.requests.cpu=null'],
      'autoscaling.targetCPUUtilizationPercentage needs resources.requests.cpu',
    ],
  ];
  for (const [what, args, message] of refusals) {
    it(`refuses ${what}`, () => {
      const result = helm('template', 'tessera', CHART, '--namespace', 'auth', ...args);
      expect(result.code).not.toBe(0);
      expect(result.stdout).toBe('');
      expect(result.stderr).toContain(message);
    });
  }

  it('helm lint refuses them too', () => {
    const result = helm('lint', CHART, '--set', 'replicaCount=3');
    expect(result.code).toBe(1);
    expect(result.stdout).toContain("at '/replicaCount': maximum: got 3, want 1");
  });
});

describe('README.md', () => {
  /** values.yaml's keys, down to the leaves (a scalar, a list, an empty or null map), with their defaults. */
  function leaves(value: Manifest, prefix = ''): [string, unknown][] {
    return Object.entries(value).flatMap(([key, entry]): [string, unknown][] => {
      const name = prefix === '' ? key : `${prefix}.${key}`;
      const nested =
        typeof entry === 'object' && entry !== null && !Array.isArray(entry) && Object.keys(entry).length > 0;
      return nested ? leaves(entry as Manifest, name) : [[name, entry]];
    });
  }

  it('has a row for every value, with its default, and none for a value that does not exist', () => {
    const values = parse(readFileSync(path.join(CHART, 'values.yaml'), 'utf8')) as Manifest;
    const readme = readFileSync(path.join(CHART, 'README.md'), 'utf8');
    const table = readme.slice(readme.indexOf('## Values'));
    const rows = [...table.matchAll(/^\| `([^`]+)` +\| `([^`]*)` +\| (.+?) +\|$/gm)].map((m) => [
      m[1],
      m[2],
      m[3],
    ]);
    expect(rows.map(([key, def]) => [key, def])).toEqual(
      leaves(values).map(([key, def]) => [key, JSON.stringify(def)]),
    );
    for (const [key, , meaning] of rows) expect(meaning, key).not.toBe('');
  });

  it('names every value set the tests render', () => {
    const readme = readFileSync(path.join(CHART, 'README.md'), 'utf8');
    for (const file of ['embedded.yaml', 'minimal-postgresql.yaml', 'postgresql.yaml'])
      expect(readme).toContain(`[examples/${file}](examples/${file})`);
  });
});

it('parses manifests as Kubernetes does (YAML 1.1)', () => {
  expect(parseManifests('a: 0440\nb: yes\n---\n')).toEqual([{ a: 288, b: true }]);
});

describe('docs/production.md', () => {
  it('its complete values file renders, lints and validates: three replicas on PostgreSQL, Redis, OTel, the apply file', () => {
    const text = readFileSync(path.join(CHART, '../../../docs/production.md'), 'utf8');
    const block = /## A complete values file[\s\S]*?```yaml\n([\s\S]*?)```/.exec(text)?.[1];
    expect(block).toBeDefined();
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'tessera-helm-docs-')), 'values.yaml');
    writeFileSync(file, block!);
    const lint = helm('lint', CHART, '--strict', '-f', file);
    expect(lint.code, lint.stdout + lint.stderr).toBe(0);
    const manifests = render('-f', file);
    for (const manifest of manifests) validateManifest(manifest);
    const deployment = manifests.find((m) => m.kind === 'Deployment')!;
    // The autoscaler holds the count (3 to 10), not the Deployment.
    expect(deployment.spec.replicas).toBeUndefined();
    expect(manifests.find((m) => m.kind === 'HorizontalPodAutoscaler')!.spec).toMatchObject({
      minReplicas: 3,
      maxReplicas: 10,
    });
    const env = Object.fromEntries(
      (deployment.spec.template.spec.containers[0].env as Manifest[]).map((e) => [e.name, e.value]),
    );
    expect(env).toMatchObject({
      TESSERA_ISSUER: 'https://auth.example.com',
      TESSERA_DATABASE_URL_FILE: '/etc/tessera/secrets/database/url',
      TESSERA_REDIS_URL_FILE: '/etc/tessera/secrets/redis/url',
      TESSERA_APPLY_FILE: '/etc/tessera/config/tessera.yaml',
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://otel-collector.observability.svc:4318',
      OTEL_EXPORTER_OTLP_HEADERS_FILE: '/etc/tessera/secrets/otel-headers/headers',
    });
    expect(manifests.map((m) => m.kind).sort()).toEqual(
      expect.arrayContaining([
        'HorizontalPodAutoscaler',
        'Ingress',
        'Job',
        'PodDisruptionBudget',
        'ServiceMonitor',
      ]),
    );
  });
});
