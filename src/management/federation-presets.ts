/*
 * The platforms whose tokens a federated credential usually accepts (docs/federation.md), written once: their
 * issuer where it is the same everywhere, the form of their `sub`, where their keys are found, and the subjects
 * the CLI's presets (--github-repo, --gitlab-project, --k8s-service-account) build. Pure data and string
 * templates, importing nothing: the console's pages, which run in the browser and may import nothing else of the
 * server (.dependency-cruiser.cjs), show the same table the CLI fills from.
 */

/** Where a credential's issuer keys are found (docs/federation.md): its discovery, a jwks_uri, or inline. */
export type PresetKeys = 'discovery' | 'jwks_uri' | 'jwks';

/** What a platform's tokens look like. */
export interface FederationPreset {
  label: string;
  /** The issuer, when it is the same everywhere; '' when it is each installation's. */
  issuer: string;
  issuerHint: string;
  /** The form of `sub`, with <placeholders>. */
  subject: string;
  subjectHint: string;
  keys: PresetKeys;
}

export const GITHUB_ISSUER = 'https://token.actions.githubusercontent.com';
export const GITLAB_ISSUER = 'https://gitlab.com';

export const FEDERATION_PRESETS = {
  kubernetes: {
    label: 'Kubernetes service account',
    issuer: '',
    issuerHint:
      "The cluster's service-account issuer: kubectl get --raw /.well-known/openid-configuration (its issuer).",
    subject: 'system:serviceaccount:<namespace>:<name>',
    subjectHint: 'The namespace and name of the service account whose projected token the pod sends.',
    keys: 'jwks',
  },
  github: {
    label: 'GitHub Actions',
    issuer: GITHUB_ISSUER,
    issuerHint: 'GitHub.com; GitHub Enterprise Server: https://<host>/_services/token.',
    subject: 'repo:<owner>/<repo>:ref:refs/heads/<branch>',
    subjectHint: 'Or repo:<owner>/<repo>:environment:<env> for the jobs of an environment.',
    keys: 'discovery',
  },
  gitlab: {
    label: 'GitLab CI',
    issuer: GITLAB_ISSUER,
    issuerHint: 'GitLab.com; a self-managed GitLab: its URL.',
    subject: 'project_path:<group>/<project>:ref_type:branch:ref:<branch>',
    subjectHint: 'The job token of id_tokens: with aud set to the audience below.',
    keys: 'discovery',
  },
  spiffe: {
    label: 'SPIFFE JWT-SVID',
    issuer: '',
    issuerHint:
      "The issuer of the trust domain's JWT-SVIDs (its OIDC discovery provider), e.g. https://oidc.example.org.",
    subject: 'spiffe://<trust-domain>/<path>',
    subjectHint: 'The SPIFFE ID of the workload.',
    keys: 'discovery',
  },
  oidc: {
    label: 'Another OIDC issuer',
    issuer: '',
    issuerHint:
      'The exact iss of its tokens; their keys are found at <issuer>/.well-known/openid-configuration.',
    subject: '<the sub of its tokens>',
    subjectHint: 'The exact sub required.',
    keys: 'discovery',
  },
} satisfies Record<string, FederationPreset>;

export type FederationPresetName = keyof typeof FEDERATION_PRESETS;

/** GitHub's sub: repo:<owner>/<repo>:ref:<ref> for a push, repo:<owner>/<repo>:environment:<name> for a job with an environment. */
export const githubSubject = (repo: string, at: { ref: string } | { environment: string }): string =>
  'ref' in at ? `repo:${repo}:ref:${at.ref}` : `repo:${repo}:environment:${at.environment}`;

/** GitLab's sub for a branch's jobs. */
export const gitlabSubject = (project: string, branch: string): string =>
  `project_path:${project}:ref_type:branch:ref:${branch}`;

/** A Kubernetes service account's sub, from `<namespace>:<name>` (or `/`); undefined when it is not that. */
export function kubernetesSubject(serviceAccount: string): string | undefined {
  const match = /^([^:/\s]+)[:/]([^:/\s]+)$/.exec(serviceAccount);
  return match ? `system:serviceaccount:${match[1]}:${match[2]}` : undefined;
}
