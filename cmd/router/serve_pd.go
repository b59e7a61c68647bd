package main

import (
	"fmt"

	"github.com/routerkit/router/runtime/plan"
)

// checkServablePD refuses a plan whose prefill/decode engines speak vLLM's
// kv_transfer_params protocol: serve dispatches SGLang's bootstrap protocol only, and a
// vLLM pair sent that would each run the whole request. Plain vLLM engines are served.
func checkServablePD(p *plan.Plan) error {
	for _, e := range p.Engines {
		if e.Role != plan.RolePlain && e.PDProtocol == plan.PDKVTransferParams {
			return fmt.Errorf("engine %s of model %s is a %s engine with pd_protocol %s, which router serve does not dispatch yet (it speaks SGLang's bootstrap protocol); serve vLLM engines as plain engines for now",
				e.ID, e.Model, e.Role, e.PDProtocol)
		}
	}
	return nil
}
