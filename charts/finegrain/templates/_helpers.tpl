{{/*
finegrain.file renders one file of the kustomize base (daemonset/, linked as files/daemonset) in
the release's namespace: every "finegrain-system" in it, the objects' namespaces and the service
account names the admission policies check alike, becomes .Release.Namespace.
Arguments: dict "root" $ "path" "<path below daemonset/>".
*/}}
{{- define "finegrain.file" -}}
{{- $content := .root.Files.Get (printf "files/daemonset/%s" .path) -}}
{{- if not $content -}}
{{- fail (printf "the chart has no files/daemonset/%s: files/daemonset must link to daemonset/ (the kustomize base), which must hold the file" .path) -}}
{{- end -}}
{{- $content | replace "finegrain-system" .root.Release.Namespace -}}
{{- end -}}

{{/*
finegrain.object is finegrain.file parsed as one object, as JSON (fromJson it).
*/}}
{{- define "finegrain.object" -}}
{{- include "finegrain.file" . | fromYaml | toJson -}}
{{- end -}}

{{/*
finegrain.args merges a values map of flags into a container's "--name=value" arguments: a flag
the map names gets the map's value in its place, the map's other flags follow in name order.
Arguments: dict "args" <list> "flags" <map>. Returns a JSON list (fromJsonArray it).
*/}}
{{- define "finegrain.args" -}}
{{- $flags := .flags -}}
{{- $out := list -}}
{{- $seen := dict -}}
{{- range .args -}}
{{- $name := trimPrefix "--" (first (splitList "=" .)) -}}
{{- if hasKey $flags $name -}}
{{- $out = append $out (printf "--%s=%v" $name (get $flags $name)) -}}
{{- $_ := set $seen $name true -}}
{{- else -}}
{{- $out = append $out . -}}
{{- end -}}
{{- end -}}
{{- range $name := keys $flags | sortAlpha -}}
{{- if not (hasKey $seen $name) -}}
{{- $out = append $out (printf "--%s=%v" $name (get $flags $name)) -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/*
finegrain.pod applies the values every workload shares to a pod template's spec and its first
container: the image, its pull policy, the flags, resources, nodeSelector, tolerations and
priority class. Arguments: dict "root" $ "pod" <spec> "values" <.Values.nodeagent or .placer>.
*/}}
{{- define "finegrain.pod" -}}
{{- $pod := .pod -}}
{{- $v := .values -}}
{{- $c := first $pod.containers -}}
{{- $_ := set $c "image" (printf "%s:%s" .root.Values.image.repository (toString .root.Values.image.tag)) -}}
{{- with .root.Values.image.pullPolicy }}{{ $_ := set $c "imagePullPolicy" . }}{{ end -}}
{{- $_ := set $c "args" (include "finegrain.args" (dict "args" $c.args "flags" $v.flags) | fromJsonArray) -}}
{{- with $v.resources }}{{ $_ := set $c "resources" . }}{{ end -}}
{{- with $v.nodeSelector }}{{ $_ := set $pod "nodeSelector" . }}{{ end -}}
{{- with $v.tolerations }}{{ $_ := set $pod "tolerations" . }}{{ end -}}
{{- with $v.priorityClassName }}{{ $_ := set $pod "priorityClassName" . }}{{ end -}}
{{- end -}}
