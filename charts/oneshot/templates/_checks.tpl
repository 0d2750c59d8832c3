{{/*
The rules between routes and teams that values.schema.json cannot say, as the dispatcher checks
them at start (ConfigLoader: routes, neverMatches, teams, checkTeams), with its words: helm refuses
what the dispatcher would, rather than rendering pods that never become ready. ChartTest
(crossFieldRulesAreRefusedByHelmAsByTheDispatcher) holds the two to the same answers.
*/}}
{{- define "oneshot.checkRoutes" -}}
{{- $routes := .Values.routes | default list -}}
{{- $heartbeat := include "oneshot.ms" (.Values.dispatch.heartbeatInterval | default "1s") | int64 -}}
{{- range $i, $r := $routes -}}
  {{- range $f := list "timeout" "launchTimeout" "hangTimeout" -}}
    {{- if and (hasKey $r $f) (lt (include "oneshot.ms" (get $r $f) | int64) 1000) -}}
      {{- fail (printf "routes[%d].%s: must be at least 1s, got \"%v\"" $i $f (get $r $f)) -}}
    {{- end -}}
  {{- end -}}
  {{- $hang := include "oneshot.ms" ($r.hangTimeout | default "2m") | int64 -}}
  {{- if hasKey $r "lease" -}}
    {{- $lease := include "oneshot.ms" $r.lease | int64 -}}
    {{- if lt $lease 200 -}}
      {{- fail (printf "routes[%d].lease: must be at least 200ms, got \"%v\"" $i $r.lease) -}}
    {{- end -}}
    {{- if ge $lease $hang -}}
      {{- fail (printf "routes[%d].lease: must be shorter than hangTimeout (%s): a runner stops itself before the dispatcher gives up on it" $i ($r.hangTimeout | default "2m")) -}}
    {{- end -}}
    {{- if lt $lease (mul 2 $heartbeat) -}}
      {{- fail (printf "routes[%d].lease: must be at least two heartbeats (dispatch.heartbeatInterval is %s), so that one lost heartbeat does not stop a build" $i (.Values.dispatch.heartbeatInterval | default "1s")) -}}
    {{- end -}}
  {{- end -}}
  {{- if hasKey $r "drainGrace" -}}
    {{- $least := add (include "oneshot.ms" ($r.cancelGrace | default "60s") | int64) 30000 -}}
    {{- if lt (include "oneshot.ms" $r.drainGrace | int64) $least -}}
      {{- fail (printf "routes[%d].drainGrace: must be at least %s, got \"%v\"" $i (include "oneshot.formatMs" $least) $r.drainGrace) -}}
    {{- end -}}
  {{- end -}}
  {{- range $j, $e := $routes -}}
    {{- if and (lt $j $i) (eq $e.name $r.name) -}}
      {{- fail (printf "routes[%d].name: duplicate route '%s' (also routes[%d])" $i $r.name $j) -}}
    {{- end -}}
  {{- end -}}
  {{- $tags := $r.tags | default dict -}}
  {{- $untagged := empty $tags -}}
  {{- if hasKey $r "untagged" }}{{ $untagged = $r.untagged }}{{ end -}}
  {{- $shadow := -1 -}}
  {{- $firstUntagged := -1 -}}
  {{- range $j, $e := $routes -}}
    {{- if lt $j $i -}}
      {{- $etags := $e.tags | default dict -}}
      {{- $eUntagged := empty $etags -}}
      {{- if hasKey $e "untagged" }}{{ $eUntagged = $e.untagged }}{{ end -}}
      {{- $contains := true -}}
      {{- range $k, $v := $tags -}}
        {{- if not (and (hasKey $etags $k) (eq (toString (get $etags $k)) (toString $v))) }}{{ $contains = false }}{{ end -}}
      {{- end -}}
      {{- if and (eq $shadow -1) $contains }}{{ $shadow = $j }}{{ end -}}
      {{- if and (eq $firstUntagged -1) $eUntagged }}{{ $firstUntagged = $j }}{{ end -}}
    {{- end -}}
  {{- end -}}
  {{- $takesTagged := and (not (empty $tags)) (eq $shadow -1) -}}
  {{- $takesUntagged := and $untagged (eq $firstUntagged -1) -}}
  {{- if not (or $takesTagged $takesUntagged) -}}
    {{- $never := printf "route '%s' can never match: " $r.name -}}
    {{- if and (empty $tags) (not $untagged) -}}
      {{- fail (printf "routes[%d].untagged: %sa route without tags takes only untagged builds; set untagged: true" $i $never) -}}
    {{- else if empty $tags -}}
      {{- fail (printf "routes[%d].tags: %suntagged builds go to routes[%d] '%s' first, which takes them (untagged: true); move this route up, or give it tags" $i $never $firstUntagged (index $routes $firstUntagged).name) -}}
    {{- else -}}
      {{- fail (printf "routes[%d].tags: %severy build it could take goes to routes[%d] '%s' first, whose tags contain all of this route's tags; give it a tag the earlier route lacks, or move it up" $i $never $shadow (index $routes $shadow).name) -}}
    {{- end -}}
  {{- end -}}
{{- end -}}
{{- $teams := .Values.teams | default list -}}
{{- $names := list -}}
{{- $guaranteed := 0 -}}
{{- range $i, $t := $teams -}}
  {{- range $j, $e := $teams -}}
    {{- if and (lt $j $i) (eq $e.name $t.name) -}}
      {{- fail (printf "teams[%d].name: duplicate team '%s' (also teams[%d])" $i $t.name $j) -}}
    {{- end -}}
  {{- end -}}
  {{- $names = append $names $t.name -}}
  {{- $guaranteed = add $guaranteed ($t.guaranteed | default 0) -}}
{{- end -}}
{{- if gt (int $guaranteed) (int .Values.dispatch.maxConcurrent) -}}
  {{- fail (printf "teams: guarantee %d slots together, more than dispatch.maxConcurrent (%d): a guarantee must be one the global limit can keep" (int $guaranteed) (int .Values.dispatch.maxConcurrent)) -}}
{{- end -}}
{{- range $i, $r := $routes -}}
  {{- if and $r.team (not (has $r.team $names)) -}}
    {{- fail (printf "routes[%d].team: names no team in teams%s, got \"%s\"" $i (ternary "" (printf " (%s)" ($names | sortAlpha | join ", ")) (empty $names)) $r.team) -}}
  {{- end -}}
{{- end -}}
{{- end -}}

{{/* A duration as the dispatcher writes one (250ms, 90s, 1h30m, 7d) in milliseconds. */}}
{{- define "oneshot.ms" -}}
{{- $total := 0 -}}
{{- range regexFindAll "[0-9]+(ms|s|m|h|d)" (toString .) -1 -}}
  {{- $unit := regexReplaceAll "^[0-9]+" . "" -}}
  {{- $total = add $total (mul (regexFind "^[0-9]+" . | int64) (get (dict "ms" 1 "s" 1000 "m" 60000 "h" 3600000 "d" 86400000) $unit)) -}}
{{- end -}}
{{- $total -}}
{{- end -}}

{{/* Milliseconds as the dispatcher formats a duration: 1h30m, 90s (as 1m30s), 250ms. */}}
{{- define "oneshot.formatMs" -}}
{{- $ms := . | int64 -}}
{{- $h := div $ms 3600000 -}}{{- $ms = mod $ms 3600000 -}}
{{- $m := div $ms 60000 -}}{{- $ms = mod $ms 60000 -}}
{{- $s := div $ms 1000 -}}{{- $ms = mod $ms 1000 -}}
{{- if gt $h 0 }}{{ $h }}h{{ end -}}
{{- if gt $m 0 }}{{ $m }}m{{ end -}}
{{- if gt $s 0 }}{{ $s }}s{{ end -}}
{{- if gt $ms 0 }}{{ $ms }}ms{{ end -}}
{{- end -}}
