{{/* The release's name prefix, at most 40 characters so that "<prefix>-<relay>" stays a DNS label. */}}
{{- define "pgoutbox.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* A relay's name: its `name`, or its slot with '_' as '-'. Argument: the relay. */}}
{{- define "pgoutbox.relayName" -}}
{{- .name | default (.slot | replace "_" "-") -}}
{{- end -}}

{{/* Labels of every object of the release. */}}
{{- define "pgoutbox.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* Selector labels of one relay. Argument: dict "root" $ "relay" $relay. */}}
{{- define "pgoutbox.selectorLabels" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
pgoutbox/relay: {{ include "pgoutbox.relayName" .relay }}
{{- end -}}

{{/* Labels of one relay's objects: the release's, the relay's and its slot. */}}
{{- define "pgoutbox.relayLabels" -}}
{{ include "pgoutbox.labels" .root }}
app.kubernetes.io/component: relay
pgoutbox/relay: {{ include "pgoutbox.relayName" .relay }}
pgoutbox/slot: {{ .relay.slot }}
{{- end -}}

{{/*
Maps merged key by key, `over` winning; any other value (a list, false, "") replaces. Unlike
mergeOverwrite, a relay's false or "" does win over the top level's. Argument: dict "base" "over";
the result as JSON.
*/}}
{{- define "pgoutbox.merge" -}}
{{- $out := deepCopy .base -}}
{{- range $key, $value := .over -}}
{{- if and (kindIs "map" $value) (kindIs "map" (get $out $key)) -}}
{{- $_ := set $out $key (include "pgoutbox.merge" (dict "base" (get $out $key) "over" $value) | fromJson) -}}
{{- else -}}
{{- $_ := set $out $key $value -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* One relay's secrets: the top-level `secrets` with the relay's merged over them. */}}
{{- define "pgoutbox.secrets" -}}
{{- include "pgoutbox.merge" (dict "base" .root.Values.secrets "over" (.relay.secrets | default dict)) -}}
{{- end -}}

{{/*
Where each Secret is mounted, relative to /etc/pgoutbox (the container's working directory and
the configuration file's folder, so that the loader, libpq and librdkafka all read the same
relative paths, and the chart's test can lay the same tree out in a temporary folder).
*/}}
{{- define "pgoutbox.secretDir" -}}
{{- printf "secrets/%s" (. | kebabcase) -}}
{{- end -}}

{{/* One relay's pgoutbox configuration (YAML). Argument: dict "root" $ "relay" $relay. */}}
{{- define "pgoutbox.config" -}}
{{- $secrets := include "pgoutbox.secrets" . | fromJson -}}
{{- $config := include "pgoutbox.merge" (dict "base" .root.Values.config "over" (.relay.config | default dict)) | fromJson -}}
{{- if not (dig "postgres" "dsn" "" $config) -}}
{{- fail (printf "relay %s: config.postgres.dsn is required (top-level config or the relay's)" .relay.slot) -}}
{{- end -}}
{{- if not (dig "kafka" "brokers" "" $config) -}}
{{- fail (printf "relay %s: config.kafka.brokers is required (top-level config or the relay's)" .relay.slot) -}}
{{- end -}}
{{- if and (not $config.tables) (not $config.messages) -}}
{{- fail (printf "relay %s: config.tables (or config.messages) must list at least one outbox" .relay.slot) -}}
{{- end -}}
{{- $postgres := $config.postgres | default dict -}}
{{- $_ := set $postgres "slot" .relay.slot -}}
{{- with $secrets.postgresPassword -}}
{{- if .secretName -}}
{{- $_ := set $postgres "password_file" (printf "%s/%s" (include "pgoutbox.secretDir" "postgresPassword") .key) -}}
{{- end -}}
{{- end -}}
{{- $_ := set $config "postgres" $postgres -}}
{{- $kafka := $config.kafka | default dict -}}
{{- $properties := $kafka.properties | default dict -}}
{{- with $secrets.kafkaSaslPassword -}}
{{- if .secretName -}}
{{- $_ := set $properties "sasl.password_file" (printf "%s/%s" (include "pgoutbox.secretDir" "kafkaSaslPassword") .key) -}}
{{- end -}}
{{- end -}}
{{- with $secrets.kafkaTls -}}
{{- if .secretName -}}
{{- $dir := include "pgoutbox.secretDir" "kafkaTls" -}}
{{- $_ := set $properties "ssl.ca.location" (printf "%s/%s" $dir .ca) -}}
{{- if .cert -}}
{{- $_ := set $properties "ssl.certificate.location" (printf "%s/%s" $dir .cert) -}}
{{- $_ := set $properties "ssl.key.location" (printf "%s/%s" $dir .key) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if $properties -}}
{{- $_ := set $kafka "properties" $properties -}}
{{- end -}}
{{- $_ := set $config "kafka" $kafka -}}
{{- with $secrets.checkpointSigningKey -}}
{{- if .secretName -}}
{{- $checkpoint := $config.checkpoint | default dict -}}
{{- $_ := set $checkpoint "signing_key_file" (printf "%s/%s" (include "pgoutbox.secretDir" "checkpointSigningKey") .key) -}}
{{- $_ := set $config "checkpoint" $checkpoint -}}
{{- end -}}
{{- end -}}
{{- $_ := set $config "metrics_address" (printf "0.0.0.0:%d" (int .root.Values.metrics.port)) -}}
{{- toYaml $config -}}
{{- end -}}

{{/*
shutdown_timeout in whole seconds, rounded up: the loader's units (ms, s, m, h), which may follow
each other as in 1m30s. Argument: the duration string.
*/}}
{{- define "pgoutbox.durationSeconds" -}}
{{- $ms := 0 -}}
{{- range regexFindAll "[0-9]+(ms|s|m|h)" . -1 -}}
{{- $n := regexFind "^[0-9]+" . | int -}}
{{- $unit := trimPrefix (regexFind "^[0-9]+" .) . -}}
{{- if eq $unit "ms" }}{{ $ms = add $ms $n }}{{ else if eq $unit "s" }}{{ $ms = add $ms (mul $n 1000) }}{{ else if eq $unit "m" }}{{ $ms = add $ms (mul $n 60000) }}{{ else }}{{ $ms = add $ms (mul $n 3600000) }}{{ end -}}
{{- end -}}
{{- div (add $ms 999) 1000 -}}
{{- end -}}

{{- define "pgoutbox.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "pgoutbox.fullname" .) -}}
{{- else -}}
{{- .Values.serviceAccount.name | default "default" -}}
{{- end -}}
{{- end -}}

{{/* Two relays may not share a slot (one would only ever be the other's standby) nor a name. */}}
{{- define "pgoutbox.checkRelays" -}}
{{- $slots := dict -}}
{{- $names := dict -}}
{{- range .Values.relays -}}
{{- if hasKey $slots .slot -}}{{- fail (printf "relays: slot %s is listed twice; each relay needs a slot of its own" .slot) -}}{{- end -}}
{{- $_ := set $slots .slot true -}}
{{- $name := include "pgoutbox.relayName" . -}}
{{- if hasKey $names $name -}}{{- fail (printf "relays: name %s is used twice; set `name` on one of them" $name) -}}{{- end -}}
{{- $_ := set $names $name true -}}
{{- end -}}
{{- end -}}
