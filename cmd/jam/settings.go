package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/jam-dev/jam/api"
)

func newSettingCmd(_ *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "setting", Short: "Operator settings (for example runtime.defaults.idle_secs)"}
	cf := addClientFlags(cmd)

	list := listCmd(cf, "list", "List every setting with its default and stored value", cobra.NoArgs, fixed("/v1/settings"),
		"KEY\tVALUE\tDEFAULT\tDESCRIPTION",
		func(out api.SettingList) [][]string {
			rows := make([][]string, len(out.Items))
			for i, s := range out.Items {
				rows[i] = []string{s.Key, string(s.Value), string(s.Default), s.Description}
			}
			return rows
		})
	get := &cobra.Command{
		Use: "get KEY", Short: "Show one setting", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, err := cf.call(cmd, http.MethodGet, "/v1/settings/"+url.PathEscape(args[0]), nil)
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), raw)
		},
	}
	set := &cobra.Command{
		Use:   "set KEY VALUE",
		Short: "Store a setting; VALUE is JSON (a bare word is taken as a string)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			value := json.RawMessage(args[1])
			if !json.Valid(value) {
				value, _ = json.Marshal(args[1])
			}
			raw, err := cf.call(cmd, http.MethodPut, "/v1/settings/"+url.PathEscape(args[0]), api.PutSettingRequest{Value: value})
			if err != nil {
				return err
			}
			return render(cf, cmd, raw, func(out api.SettingBody) error {
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s = %s\n", out.Key, out.Value)
				return err
			})
		},
	}
	cmd.AddCommand(list, get, set)
	return cmd
}
