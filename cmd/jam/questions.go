package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/internal/domain"
)

func newQuestionCmd(_ *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use: "question", Aliases: []string{"questions"},
		Short: "Runtimes' questions to humans: list them, answer them",
		Long: `A runtime asks a human of its room with jam_ask_question: the question is posted as the
agent's message with an answer code, and the human's reply starting with the code
("Q7K2 yes") answers it. An operator can answer here instead.`,
	}
	cf := addClientFlags(cmd)
	var state, agent, room string
	var limit int
	list := &cobra.Command{
		Use: "list", Short: "List questions, newest first", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			raw, err := cf.call(cmd, http.MethodGet, "/v1/questions?"+filterQuery(map[string]string{"state": state, "agent": agent, "room": room}, limit), nil)
			if err != nil {
				return err
			}
			return render(cf, cmd, raw, func(out api.QuestionList) error {
				rows := make([][]string, len(out.Items))
				for i, q := range out.Items {
					answer := "-"
					if q.Answer != nil {
						answer = oneLine(*q.Answer)
					}
					rows[i] = []string{q.ID.String(), q.Code, string(q.State), q.Recipient, oneLine(q.Text), answer}
				}
				return table(cmd.OutOrStdout(), "ID\tCODE\tSTATE\tFOR\tQUESTION\tANSWER", rows)
			})
		},
	}
	list.Flags().StringVar(&state, "state", "", "only questions in this state: "+strings.Join(domain.QuestionStates.Strings(), ", "))
	list.Flags().StringVar(&room, "room", "", "only this room's questions")
	list.Flags().StringVar(&agent, "agent", "", "only this agent's questions")
	list.Flags().IntVar(&limit, "limit", 0, "at most this many (default 100, at most 500)")
	show := &cobra.Command{
		Use: "show ID", Short: "Show one question", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return showJSON(cf, cmd, "/v1/questions/"+url.PathEscape(args[0]))
		},
	}
	answer := &cobra.Command{
		Use:   "answer ID TEXT...",
		Short: "Answer a pending question as the operator (the words after ID are the answer)",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, err := cf.call(cmd, http.MethodPost, "/v1/questions/"+url.PathEscape(args[0])+"/answer",
				api.AnswerQuestionRequest{Text: strings.Join(args[1:], " ")})
			if err != nil {
				return err
			}
			return render(cf, cmd, raw, func(q api.QuestionBody) error {
				by := ""
				if q.AnsweredBy != nil {
					by = " by " + *q.AnsweredBy
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s: %s%s\n", q.ID, q.State, by)
				return err
			})
		},
	}
	cmd.AddCommand(list, show, answer)
	return cmd
}

// oneLine fits free text into a table cell: newlines become spaces, and it is bounded.
func oneLine(s string) string {
	return domain.Truncate(strings.Join(strings.Fields(s), " "), 60)
}
