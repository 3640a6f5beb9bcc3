package http

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/leafd/leafd"
)

// repairJSON is the answer of POST /api/tags/{tag}/repair: the tag as the
// other admin routes answer it, after the repair, and what the repair did.
type repairJSON struct {
	tagJSON
	// Repaired says whether max_id was raised; RaisedFrom is the max_id it
	// was raised from, only then.
	Repaired   bool   `json:"repaired"`
	RaisedFrom string `json:"raised_from,omitempty"`
	// HighWaterMark is the end of the highest range ever handed out for
	// the tag, "0" when leafd never loaded one.
	HighWaterMark string `json:"high_water_mark"`
}

// repairTag answers POST /api/tags/{tag}/repair: it raises a rewound tag's
// max_id to its high-water mark (docs/contract.md, Rewound tags), and
// changes nothing on a tag that is not rewound. The body, if any, is not
// read: the action takes no parameters.
func (s *Server) repairTag(c *gin.Context) {
	name := c.Param("tag")
	if err := leafd.ValidateTag(name); err != nil {
		s.writeError(c, err)
		return
	}
	r, err := s.tags.RepairTag(c.Request.Context(), name)
	if err != nil {
		s.writeError(c, err)
		return
	}
	if s.seg != nil {
		s.seg.Upsert(r.After)
	}
	out := repairJSON{tagJSON: toJSON(r.After), Repaired: r.Raised, HighWaterMark: strconv.FormatInt(r.Mark, 10)}
	if r.Raised {
		out.RaisedFrom = strconv.FormatInt(r.Before.MaxID, 10)
		s.log.Warn("admin: tag repaired", append([]any{"tag", name, "old_max_id", r.Before.MaxID, "max_id", r.After.MaxID,
			"high_water_mark", r.Mark}, caller(c)...)...)
	} else {
		s.log.Info("admin: tag repair changed nothing", append([]any{"tag", name, "max_id", r.After.MaxID,
			"high_water_mark", r.Mark}, caller(c)...)...)
	}
	c.JSON(http.StatusOK, out)
}
