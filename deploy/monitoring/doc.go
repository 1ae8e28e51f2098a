// Package monitoring holds netctl's Grafana dashboard
// (netctl-dashboard.json) and Prometheus alerting rules
// (netctl-alerts.yml, unit-tested by netctl-alerts_test.yml) for
// netctl exporter. It has no code: its tests check the files with
// promtool (check rules, test rules) and hold every query to the metrics
// and labels the exporter really serves (exporter.MetricLabels).
package monitoring
