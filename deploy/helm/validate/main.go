// Command validate is the test of the pgoutbox Helm chart (deploy/helm/pgoutbox), with Helm as a
// library so that one Go build does everything:
//
//   - `helm lint --strict` (a warning fails) and `helm template` (values.schema.json applied) for
//     each value set in the chart's ci/ folder;
//   - every rendered manifest decoded strictly into its Kubernetes API type (k8s.io/api, and
//     prometheus-operator's monitoring/v1 for ServiceMonitor and PrometheusRule): an unknown or
//     misspelt field, a duplicate key or a value of the wrong type fails;
//   - what a user relies on, read from the decoded objects: two replicas and Recreate, the
//     probes, the security context, terminationGracePeriodSeconds above shutdown_timeout, the
//     labels, no secret in a ConfigMap, a NetworkPolicy that lets in only the metrics port;
//   - each relay's rendered configuration loaded by `pgoutbox config validate`, in a folder laid
//     out as the pod's /etc/pgoutbox (the ConfigMap's file, and a stand-in file for every key of
//     every mounted Secret), so that a configuration naming a file no volume mounts fails;
//   - the PrometheusRule's groups equal deploy/prometheus/alerts.yaml's, and the chart's copy of
//     that file is byte for byte the same;
//   - each value set in ci/invalid/ refused, with the message its `# expect:` line names.
//
// Usage:
//
//	validate -chart deploy/helm/pgoutbox -pgoutbox build/release/src/app/pgoutbox \
//	         -alerts deploy/prometheus/alerts.yaml [-values FILE]... [-print]
//
// Without -values it takes ci/*.yaml and ci/invalid/*.yaml of the chart. It ends with the line
// "N passed, N failed" and exits 1 when anything failed.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// kubeVersion is the cluster version the chart is rendered for, as `helm template --kube-version`
// (a Helm built from source without its release ldflags would assume 1.20).
var kubeVersion = flag.String("kube-version", "1.31.0", "the Kubernetes version to render and lint for")

const (
	releaseName = "pgoutbox"
	namespace   = "outbox"
	configDir   = "/etc/pgoutbox"
)

// newObject maps each apiVersion/kind the chart may render to its Go type; any other kind fails.
func newObject(apiVersion, kind string) (any, bool) {
	switch apiVersion + "/" + kind {
	case "v1/ConfigMap":
		return &corev1.ConfigMap{}, true
	case "v1/Service":
		return &corev1.Service{}, true
	case "v1/ServiceAccount":
		return &corev1.ServiceAccount{}, true
	case "apps/v1/Deployment":
		return &appsv1.Deployment{}, true
	case "policy/v1/PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, true
	case "networking.k8s.io/v1/NetworkPolicy":
		return &networkingv1.NetworkPolicy{}, true
	case "monitoring.coreos.com/v1/ServiceMonitor":
		return &monitoringv1.ServiceMonitor{}, true
	case "monitoring.coreos.com/v1/PrometheusRule":
		return &monitoringv1.PrometheusRule{}, true
	}
	return nil, false
}

type tally struct{ passed, failed int }

func (t *tally) check(name string, errs []error) {
	if len(errs) == 0 {
		t.passed++
		fmt.Printf("ok    %s\n", name)
		return
	}
	t.failed++
	fmt.Printf("FAIL  %s\n", name)
	for _, err := range errs {
		fmt.Printf("        %v\n", err)
	}
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	chartDir := flag.String("chart", "deploy/helm/pgoutbox", "the chart's folder")
	binary := flag.String("pgoutbox", "", "the pgoutbox binary, for `config validate` (empty: skipped)")
	alerts := flag.String("alerts", "deploy/prometheus/alerts.yaml", "the alert rules the PrometheusRule must hold")
	printManifests := flag.Bool("print", false, "print the rendered manifests of each value set")
	var valueFiles multiFlag
	flag.Var(&valueFiles, "values", "a value set to lint, render and check (repeatable; default: the chart's ci/*.yaml)")
	flag.Parse()
	if *binary != "" {
		// config validate runs in a temporary folder.
		if abs, err := filepath.Abs(*binary); err == nil {
			*binary = abs
		}
	}

	var t tally
	invalid := []string{}
	if len(valueFiles) == 0 {
		valueFiles, _ = filepath.Glob(filepath.Join(*chartDir, "ci", "*.yaml"))
		invalid, _ = filepath.Glob(filepath.Join(*chartDir, "ci", "invalid", "*.yaml"))
		if len(valueFiles) < 3 || len(invalid) == 0 {
			fmt.Printf("FAIL  %s/ci has %d value sets and %d invalid ones: at least 3 and 1 expected\n", *chartDir, len(valueFiles), len(invalid))
			os.Exit(1)
		}
	}
	t.check("files/alerts.yaml is "+*alerts, sameFile(filepath.Join(*chartDir, "files", "alerts.yaml"), *alerts))
	for _, file := range valueFiles {
		checkValueSet(&t, *chartDir, file, *binary, *alerts, *printManifests)
	}
	for _, file := range invalid {
		t.check("refused: "+file, checkRefused(*chartDir, file))
	}
	fmt.Printf("%d passed, %d failed\n", t.passed, t.failed)
	if t.failed > 0 {
		os.Exit(1)
	}
}

func sameFile(a, b string) []error {
	x, err := os.ReadFile(a)
	if err != nil {
		return []error{err}
	}
	y, err := os.ReadFile(b)
	if err != nil {
		return []error{err}
	}
	if !bytes.Equal(x, y) {
		return []error{fmt.Errorf("%s differs from %s: copy it (cp %s %s)", a, b, b, a)}
	}
	return nil
}

func readValues(file string) (map[string]any, error) {
	vals, err := chartutil.ReadValuesFile(file)
	if err != nil {
		return nil, err
	}
	return vals.AsMap(), nil
}

// render is `helm template`: the chart's values coalesced with the file's, checked against
// values.schema.json, then the templates rendered.
func render(chartDir string, vals map[string]any) (*chart.Chart, map[string]string, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return nil, nil, err
	}
	caps, err := capabilities()
	if err != nil {
		return ch, nil, err
	}
	// As helm template and helm install: the chart's kubeVersion range must admit the cluster's.
	if ch.Metadata.KubeVersion != "" && !chartutil.IsCompatibleRange(ch.Metadata.KubeVersion, caps.KubeVersion.String()) {
		return ch, nil, fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s", ch.Metadata.KubeVersion, caps.KubeVersion.String())
	}
	options := chartutil.ReleaseOptions{Name: releaseName, Namespace: namespace, Revision: 1, IsInstall: true}
	top, err := chartutil.ToRenderValues(ch, vals, options, caps)
	if err != nil {
		return ch, nil, err
	}
	out, err := engine.Render(ch, top)
	return ch, out, err
}

func capabilities() (*chartutil.Capabilities, error) {
	kv, err := chartutil.ParseKubeVersion(*kubeVersion)
	if err != nil {
		return nil, err
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = *kv
	return caps, nil
}

func checkValueSet(t *tally, chartDir, file, binary, alerts string, printManifests bool) {
	vals, err := readValues(file)
	if err != nil {
		t.check("read "+file, []error{err})
		return
	}
	// helm lint --strict: every message of severity warning or above fails.
	kv, err := chartutil.ParseKubeVersion(*kubeVersion)
	if err != nil {
		t.check("-kube-version", []error{err})
		return
	}
	linter := lint.AllWithKubeVersionAndSchemaValidation(chartDir, vals, namespace, kv, false)
	var lintErrs []error
	for _, m := range linter.Messages {
		if m.Severity >= support.WarningSev {
			lintErrs = append(lintErrs, fmt.Errorf("%s", m.Error()))
		}
	}
	t.check("helm lint --strict -f "+file, lintErrs)

	_, rendered, err := render(chartDir, vals)
	if err != nil {
		t.check("helm template -f "+file, []error{err})
		return
	}
	var docs []string
	names := make([]string, 0, len(rendered))
	for name := range rendered {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if strings.HasSuffix(name, "NOTES.txt") {
			continue
		}
		split := releaseutil.SplitManifests(rendered[name])
		keys := make([]string, 0, len(split))
		for k := range split {
			keys = append(keys, k)
		}
		sort.Sort(releaseutil.BySplitManifestsOrder(keys))
		for _, k := range keys {
			if strings.TrimSpace(split[k]) != "" {
				docs = append(docs, "# Source: "+name+"\n"+split[k])
			}
		}
	}
	if printManifests {
		for _, d := range docs {
			fmt.Printf("---\n%s\n", d)
		}
	}
	t.check(fmt.Sprintf("helm template -f %s: %d manifests", file, len(docs)), nil)

	objects := map[string][]any{}
	var decodeErrs []error
	for _, doc := range docs {
		obj, err := decodeStrict(doc)
		if err != nil {
			decodeErrs = append(decodeErrs, err)
			continue
		}
		kind := reflect.TypeOf(obj).Elem().Name()
		objects[kind] = append(objects[kind], obj)
	}
	t.check(fmt.Sprintf("strict decode into the API types (%s): %s", file, kinds(objects)), decodeErrs)
	if len(decodeErrs) > 0 {
		return
	}

	replicas := 2
	if r, ok := vals["replicas"].(float64); ok {
		replicas = int(r)
	}
	readiness := "/readyz"
	if p, ok := vals["probes"].(map[string]any); ok {
		if r, ok := p["readiness"].(map[string]any); ok {
			if path, ok := r["path"].(string); ok {
				readiness = path
			}
		}
	}
	configMaps := map[string]*corev1.ConfigMap{}
	for _, o := range objects["ConfigMap"] {
		cm := o.(*corev1.ConfigMap)
		configMaps[cm.Name] = cm
		t.check(fmt.Sprintf("%s: ConfigMap %s holds no secret", file, cm.Name), noSecretIn(cm))
	}
	for _, o := range objects["Deployment"] {
		d := o.(*appsv1.Deployment)
		cfg, cfgErrs := relayConfig(d, configMaps)
		t.check(fmt.Sprintf("%s: Deployment %s as docs/kubernetes.md says", file, d.Name), append(cfgErrs, checkDeployment(d, cfg, replicas, readiness)...))
		t.check(fmt.Sprintf("%s: Deployment %s selected by its Service and PodDisruptionBudget", file, d.Name), checkSelected(d, objects))
		if binary != "" && cfg != nil {
			t.check(fmt.Sprintf("%s: pgoutbox config validate, Deployment %s's files", file, d.Name), validateInPodLayout(d, configMaps, binary))
		}
	}
	for _, o := range objects["NetworkPolicy"] {
		np := o.(*networkingv1.NetworkPolicy)
		from, errs := checkNetworkPolicy(np, objects)
		t.check(fmt.Sprintf("%s: NetworkPolicy %s admits only the metrics port of every relay's pods, from %s", file, np.Name, from), errs)
	}
	for _, o := range objects["PrometheusRule"] {
		t.check(fmt.Sprintf("%s: PrometheusRule holds %s", file, alerts), checkRules(o.(*monitoringv1.PrometheusRule), alerts))
	}
}

func kinds(objects map[string][]any) string {
	var parts []string
	for k, v := range objects {
		parts = append(parts, fmt.Sprintf("%d %s", len(v), k))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// decodeStrict decodes one manifest into its API type: duplicate keys (YAML), unknown or
// misspelt fields (case-sensitive) and mistyped values are errors.
func decodeStrict(doc string) (any, error) {
	js, err := yaml.YAMLToJSONStrict([]byte(doc))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", firstLine(doc), err)
	}
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(js, &meta); err != nil {
		return nil, fmt.Errorf("%s: %w", firstLine(doc), err)
	}
	obj, ok := newObject(meta.APIVersion, meta.Kind)
	if !ok {
		return nil, fmt.Errorf("%s: %s %s: a kind this test does not know; add its type to newObject", firstLine(doc), meta.APIVersion, meta.Kind)
	}
	strictErrs, err := kjson.UnmarshalStrict(js, obj)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", meta.Kind, meta.Metadata.Name, err)
	}
	if len(strictErrs) > 0 {
		var msgs []string
		for _, e := range strictErrs {
			msgs = append(msgs, e.Error())
		}
		return nil, fmt.Errorf("%s %s: %s", meta.Kind, meta.Metadata.Name, strings.Join(msgs, "; "))
	}
	// Names, label keys and label values as the API server checks them: a Service's name is a
	// DNS-1035 label (it becomes a DNS name), the others' DNS-1123 subdomains.
	var labelErrs []string
	if meta.Kind == "Service" {
		labelErrs = append(labelErrs, validation.IsDNS1035Label(meta.Metadata.Name)...)
	} else {
		labelErrs = append(labelErrs, validation.IsDNS1123Subdomain(meta.Metadata.Name)...)
	}
	if m, ok := obj.(metav1.Object); ok {
		for k, v := range m.GetLabels() {
			labelErrs = append(labelErrs, validation.IsQualifiedName(k)...)
			labelErrs = append(labelErrs, validation.IsValidLabelValue(v)...)
		}
	}
	if len(labelErrs) > 0 {
		return nil, fmt.Errorf("%s %s: name or labels: %s", meta.Kind, meta.Metadata.Name, strings.Join(labelErrs, "; "))
	}
	return obj, nil
}

func firstLine(doc string) string {
	for _, l := range strings.Split(doc, "\n") {
		if strings.HasPrefix(l, "# Source:") {
			return strings.TrimPrefix(l, "# ")
		}
	}
	return "manifest"
}

var secretKeys = []string{"password", "signing_key", "sasl.password", "ssl.key.pem", "sasl.oauthbearer.config", "ssl.key.password"}

// noSecretIn: a ConfigMap may name secret files, never hold a secret value.
func noSecretIn(cm *corev1.ConfigMap) []error {
	var errs []error
	for name, text := range cm.Data {
		var doc map[string]any
		if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		walk(doc, "", func(path string) {
			for _, s := range secretKeys {
				if strings.HasSuffix(path, "."+s) || path == s {
					errs = append(errs, fmt.Errorf("%s: %s holds a secret value", name, path))
				}
			}
		})
	}
	return errs
}

func walk(v any, prefix string, visit func(string)) {
	switch x := v.(type) {
	case map[string]any:
		for k, child := range x {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			visit(p)
			walk(child, p, visit)
		}
	case []any:
		for i, child := range x {
			walk(child, fmt.Sprintf("%s[%d]", prefix, i), visit)
		}
	}
}

type relayCfg struct {
	Postgres struct {
		Slot string `json:"slot"`
	} `json:"postgres"`
	Kafka struct {
		Properties map[string]string `json:"properties"`
	} `json:"kafka"`
	ShutdownTimeout string `json:"shutdown_timeout"`
	MetricsAddress  string `json:"metrics_address"`
}

func relayConfig(d *appsv1.Deployment, configMaps map[string]*corev1.ConfigMap) (*relayCfg, []error) {
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.ConfigMap == nil {
			continue
		}
		cm, ok := configMaps[v.ConfigMap.Name]
		if !ok {
			return nil, []error{fmt.Errorf("volume %s: ConfigMap %s is not rendered", v.Name, v.ConfigMap.Name)}
		}
		var cfg relayCfg
		if err := yaml.Unmarshal([]byte(cm.Data["pgoutbox.yaml"]), &cfg); err != nil {
			return nil, []error{err}
		}
		return &cfg, nil
	}
	return nil, []error{fmt.Errorf("no ConfigMap volume")}
}

func checkDeployment(d *appsv1.Deployment, cfg *relayCfg, replicas int, readiness string) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	spec := d.Spec.Template.Spec
	if d.Spec.Replicas == nil || int(*d.Spec.Replicas) != replicas {
		fail("replicas: want %d", replicas)
	}
	if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		fail("strategy %q: want Recreate", d.Spec.Strategy.Type)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		fail("automountServiceAccountToken: want false")
	}
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		fail("securityContext.runAsNonRoot: want true")
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		fail("securityContext.seccompProfile: want RuntimeDefault")
	}
	if len(spec.Containers) != 1 {
		fail("%d containers: want 1", len(spec.Containers))
		return errs
	}
	c := spec.Containers[0]
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		fail("container readOnlyRootFilesystem: want true")
	}
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		fail("container allowPrivilegeEscalation: want false")
	}
	if sc == nil || sc.Capabilities == nil || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
		fail("container capabilities: want drop [ALL], add none")
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		fail("livenessProbe: want GET /healthz")
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != readiness {
		fail("readinessProbe: want GET %s", readiness)
	}
	if c.WorkingDir != configDir {
		fail("workingDir %q: want %s (relative paths in the configuration)", c.WorkingDir, configDir)
	}
	if c.Resources.Limits.Memory().IsZero() || c.Resources.Requests.Memory().IsZero() {
		fail("resources: want a memory request and limit")
	}
	if cfg == nil {
		return errs
	}
	if got := d.Labels["pgoutbox/slot"]; got != cfg.Postgres.Slot || got == "" {
		fail("label pgoutbox/slot %q, configuration's slot %q", got, cfg.Postgres.Slot)
	}
	if got := d.Spec.Template.Labels["pgoutbox/slot"]; got != cfg.Postgres.Slot {
		fail("pod label pgoutbox/slot %q, configuration's slot %q", got, cfg.Postgres.Slot)
	}
	timeout := 30 * time.Second
	if cfg.ShutdownTimeout != "" {
		var err error
		if timeout, err = time.ParseDuration(cfg.ShutdownTimeout); err != nil {
			fail("shutdown_timeout %q: %v", cfg.ShutdownTimeout, err)
		}
	}
	if spec.TerminationGracePeriodSeconds == nil || time.Duration(*spec.TerminationGracePeriodSeconds)*time.Second <= timeout {
		fail("terminationGracePeriodSeconds %v: want more than shutdown_timeout %v", spec.TerminationGracePeriodSeconds, timeout)
	}
	port := ""
	for _, p := range c.Ports {
		if p.Name == "metrics" {
			port = fmt.Sprint(p.ContainerPort)
		}
	}
	if cfg.MetricsAddress != "0.0.0.0:"+port {
		fail("metrics_address %q: want 0.0.0.0:<the container's metrics port %s>", cfg.MetricsAddress, port)
	}
	return errs
}

func checkSelected(d *appsv1.Deployment, objects map[string][]any) []error {
	pod := labels.Set(d.Spec.Template.Labels)
	var errs []error
	service, pdb := false, false
	for _, o := range objects["Service"] {
		s := o.(*corev1.Service)
		if labels.SelectorFromSet(s.Spec.Selector).Matches(pod) {
			if labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(d.Spec.Selector.MatchLabels)) {
				service = true
			}
		}
	}
	for _, o := range objects["PodDisruptionBudget"] {
		p := o.(*policyv1.PodDisruptionBudget)
		if labels.SelectorFromSet(p.Spec.Selector.MatchLabels).Matches(pod) {
			pdb = true
		}
	}
	if !labels.SelectorFromSet(d.Spec.Selector.MatchLabels).Matches(pod) {
		errs = append(errs, fmt.Errorf("the Deployment's selector does not match its pods"))
	}
	if !service {
		errs = append(errs, fmt.Errorf("no Service selects its pods"))
	}
	if len(objects["PodDisruptionBudget"]) > 0 && !pdb {
		errs = append(errs, fmt.Errorf("no PodDisruptionBudget selects its pods"))
	}
	return errs
}

// checkNetworkPolicy: the policy selects every relay's pods and lets in nothing but their metrics
// port (pgoutbox listens on no other); it returns the peers it lets in, for the report.
func checkNetworkPolicy(np *networkingv1.NetworkPolicy, objects map[string][]any) (string, []error) {
	var errs []error
	selector, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		return "", []error{err}
	}
	for _, o := range objects["Deployment"] {
		d := o.(*appsv1.Deployment)
		if !selector.Matches(labels.Set(d.Spec.Template.Labels)) {
			errs = append(errs, fmt.Errorf("does not select Deployment %s's pods", d.Name))
		}
	}
	ingress := false
	for _, t := range np.Spec.PolicyTypes {
		ingress = ingress || t == networkingv1.PolicyTypeIngress
	}
	if !ingress {
		errs = append(errs, fmt.Errorf("policyTypes lacks Ingress: every port is open to every peer"))
	}
	var from []string
	for i, rule := range np.Spec.Ingress {
		if len(rule.Ports) == 0 {
			errs = append(errs, fmt.Errorf("ingress[%d] admits every port", i))
		}
		for _, p := range rule.Ports {
			if p.Port == nil || p.Port.String() != "metrics" || p.EndPort != nil {
				errs = append(errs, fmt.Errorf("ingress[%d] admits port %v, not only the metrics port", i, p.Port))
			}
		}
		if len(rule.From) == 0 {
			from = append(from, "anywhere")
		}
		for _, peer := range rule.From {
			from = append(from, describePeer(peer))
		}
	}
	return "[" + strings.Join(from, ", ") + "]", errs
}

// describePeer: "pods a=b in every namespace", "all pods in namespaces c=d", "addresses 10.0.0.0/8".
func describePeer(p networkingv1.NetworkPolicyPeer) string {
	if p.IPBlock != nil {
		return "addresses " + p.IPBlock.CIDR
	}
	pods := "all pods"
	if p.PodSelector != nil && (len(p.PodSelector.MatchLabels) > 0 || len(p.PodSelector.MatchExpressions) > 0) {
		pods = "pods " + metav1.FormatLabelSelector(p.PodSelector)
	}
	switch {
	case p.NamespaceSelector == nil:
		return pods + " in the release's namespace"
	case len(p.NamespaceSelector.MatchLabels) == 0 && len(p.NamespaceSelector.MatchExpressions) == 0:
		return pods + " in every namespace"
	default:
		return pods + " in namespaces " + metav1.FormatLabelSelector(p.NamespaceSelector)
	}
}

// validateInPodLayout lays out the pod's /etc/pgoutbox in a temporary folder — the ConfigMap's
// file and a stand-in for each key of each mounted Secret — and runs `pgoutbox config validate`
// there with the container's PGOUTBOX_* variables, as the container would start. Every relative
// path the container's PGSSL* variables and the configuration's ssl.*.location name must exist.
func validateInPodLayout(d *appsv1.Deployment, configMaps map[string]*corev1.ConfigMap, binary string) []error {
	dir, err := os.MkdirTemp("", "pgoutbox-chart-")
	if err != nil {
		return []error{err}
	}
	defer os.RemoveAll(dir)
	spec := d.Spec.Template.Spec
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	var errs []error
	c := spec.Containers[0]
	for _, m := range c.VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok {
			errs = append(errs, fmt.Errorf("volumeMount %s: no such volume", m.Name))
			continue
		}
		if !strings.HasPrefix(m.MountPath, configDir+"/") {
			errs = append(errs, fmt.Errorf("volumeMount %s at %s: outside %s", m.Name, m.MountPath, configDir))
			continue
		}
		target := filepath.Join(dir, strings.TrimPrefix(m.MountPath, configDir+"/"))
		switch {
		case v.ConfigMap != nil:
			text, ok := configMaps[v.ConfigMap.Name].Data[m.SubPath]
			if !ok {
				errs = append(errs, fmt.Errorf("volumeMount %s: ConfigMap %s has no key %q", m.Name, v.ConfigMap.Name, m.SubPath))
				continue
			}
			errs = appendErr(errs, os.WriteFile(target, []byte(text), 0o600))
		case v.Secret != nil:
			if len(v.Secret.Items) == 0 {
				errs = append(errs, fmt.Errorf("volume %s: Secret %s mounted without items: the test cannot know its keys", m.Name, v.Secret.SecretName))
			}
			for _, item := range v.Secret.Items {
				file := filepath.Join(target, item.Path)
				errs = appendErr(errs, os.MkdirAll(filepath.Dir(file), 0o700))
				// 64 bytes: a signing key needs at least 32.
				errs = appendErr(errs, os.WriteFile(file, []byte(strings.Repeat("s", 64)+"\n"), 0o400))
			}
		default:
			errs = append(errs, fmt.Errorf("volume %s: neither a ConfigMap nor a Secret", m.Name))
		}
	}
	env := []string{"PATH=" + os.Getenv("PATH")}
	for _, e := range c.Env {
		if strings.HasPrefix(e.Name, "PGSSL") && e.Name != "PGSSLMODE" {
			if _, err := os.Stat(filepath.Join(dir, e.Value)); err != nil {
				errs = append(errs, fmt.Errorf("env %s=%s: no mounted file there", e.Name, e.Value))
			}
		}
		if strings.HasPrefix(e.Name, "PGOUTBOX_") && e.ValueFrom == nil {
			env = append(env, e.Name+"="+e.Value)
		}
	}
	var cfg relayCfg
	if text, err := os.ReadFile(filepath.Join(dir, "pgoutbox.yaml")); err == nil {
		_ = yaml.Unmarshal(text, &cfg)
	}
	for k, v := range cfg.Kafka.Properties {
		if strings.HasSuffix(k, ".location") {
			if _, err := os.Stat(filepath.Join(dir, v)); err != nil {
				errs = append(errs, fmt.Errorf("kafka.properties.%s=%s: no mounted file there", k, v))
			}
		}
	}
	cmd := exec.Command(binary, "config", "validate", "pgoutbox.yaml")
	cmd.Dir = dir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if len(out) > 0 {
		fmt.Printf("        %s", out)
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("pgoutbox config validate: %v", err))
	}
	return errs
}

func appendErr(errs []error, err error) []error {
	if err != nil {
		return append(errs, err)
	}
	return errs
}

// checkRules: the PrometheusRule's groups are the alert file's, rule for rule.
func checkRules(rule *monitoringv1.PrometheusRule, alertsFile string) []error {
	text, err := os.ReadFile(alertsFile)
	if err != nil {
		return []error{err}
	}
	var want struct {
		Groups []monitoringv1.RuleGroup `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(text, &want); err != nil {
		return []error{fmt.Errorf("%s: %w", alertsFile, err)}
	}
	if len(want.Groups) == 0 {
		return []error{fmt.Errorf("%s: no groups", alertsFile)}
	}
	if !reflect.DeepEqual(want.Groups, rule.Spec.Groups) {
		return []error{fmt.Errorf("the PrometheusRule's groups differ from %s", alertsFile)}
	}
	return nil
}

// checkRefused: a value set under ci/invalid must fail to render, and its first line
// "# expect: TEXT" names a part of the message.
func checkRefused(chartDir, file string) []error {
	text, err := os.ReadFile(file)
	if err != nil {
		return []error{err}
	}
	first, _, _ := strings.Cut(string(text), "\n")
	expect, ok := strings.CutPrefix(first, "# expect: ")
	if !ok {
		return []error{fmt.Errorf("its first line must be \"# expect: <part of the error>\"")}
	}
	vals, err := readValues(file)
	if err != nil {
		return []error{err}
	}
	_, _, err = render(chartDir, vals)
	if err == nil {
		return []error{fmt.Errorf("rendered without an error")}
	}
	fmt.Printf("        refused: %s\n", strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", " | "))
	if !strings.Contains(err.Error(), expect) {
		return []error{fmt.Errorf("the error does not contain %q", expect)}
	}
	return nil
}
