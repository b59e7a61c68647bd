package tui

import (
	"slices"
	"strings"
	"testing"

	"charm.land/lipgloss/v2"
)

func TestTableGivesWay(t *testing.T) {
	tab := &table{
		cols: []column{
			{title: "ID"},
			{title: "NAME", flex: true, minWidth: 5, priority: 3},
			{title: "N", right: true, priority: 1},
			{title: "EXTRA", priority: 2},
		},
		rows: []row{{cells: []string{"a1", "a-long-name", "7", "xx"}}, {cells: []string{"b22", "b", "12", ""}}},
	}
	tests := []struct {
		width int
		want  []int
	}{
		{0, []int{3, 11, 2, 5}},  // unlimited: natural widths
		{24, []int{3, 11, 2, 5}}, // 21 + 3 spaces
		{23, []int{3, 10, 2, 5}}, // the flexible column gives way first
		{18, []int{3, 5, 2, 5}},  // down to its minimum
		{17, []int{3, 5, 2, 0}},  // then the next in priority is dropped
		{9, []int{3, 5, 0, 0}},
		{4, []int{3, 5, 0, 0}}, // essential columns stay; render clips the lines
	}
	for _, tt := range tests {
		if got := tab.layout(tt.width); !slices.Equal(got, tt.want) {
			t.Errorf("layout(%d) = %v, want %v", tt.width, got, tt.want)
		}
	}
	got := strings.Join(tab.render(23, lipgloss.Style{}), "\n")
	want := "ID  NAME        N EXTRA\n" +
		"a1  a-long-na…  7 xx\n" +
		"b22 b          12"
	if got != want {
		t.Errorf("render(23):\n%s\nwant:\n%s", got, want)
	}
	for _, l := range tab.render(4, lipgloss.Style{}) {
		if len(l) > 4 {
			t.Errorf("render(4) line %q is wider than 4", l)
		}
	}
}
