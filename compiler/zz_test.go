package compiler
import ("testing";"fmt";"cuelang.org/go/cue";"cuelang.org/go/cue/cuecontext";"cuelang.org/go/encoding/yaml")
func TestX(t *testing.T){
 ctx:=cuecontext.New()
 f,err:=yaml.Extract("a.yaml",[]byte("models:\n  m:\n    buckets:\n      - id: x\n        fuse:\n          a: 1\n        worker_ids: []\n        stable_pair: true\n"))
 if err!=nil{t.Fatal(err)}
 v:=ctx.BuildFile(f)
 b:=v.LookupPath(cue.ParsePath("models.m.buckets[0]"))
 it,_:=b.Fields()
 for it.Next(){ fmt.Printf("%s pos=%v src=%T\n", it.Selector(), it.Value().Pos(), it.Value().Source())}
 var x struct{W []string `json:"worker_ids"`}
 fmt.Println(b.Decode(&x), x.W==nil, len(x.W))
}
